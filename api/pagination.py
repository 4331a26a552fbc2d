from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination

from lib.db.prepared import MAX_ID


class IdCursorPagination(CursorPagination):
    """Stable pages over growing data: ordered by the primary key.

    A cursor is opaque to clients but not tamper-proof: a forged or truncated one is a 400
    naming the `cursor` parameter, never a database error on a position that is not an id.
    """

    ordering = "id"
    page_size_query_param = "page_size"
    max_page_size = 1000
    invalid_cursor_message = "Invalid cursor: use the 'next' or 'previous' link of a page as it was given."

    def _invalid(self) -> ValidationError:
        return ValidationError({self.cursor_query_param: [self.invalid_cursor_message]})

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            raise self._invalid() from None
        ordering = (self.ordering,) if isinstance(self.ordering, str) else self.ordering
        if cursor is not None and cursor.position is not None and ordering[0].lstrip("-") == "id":
            position = cursor.position
            if not position.isascii() or not position.isdigit() or int(position) > MAX_ID:
                raise self._invalid()
        return cursor

    def paginate_queryset(self, queryset, request, view=None):
        if request.query_params.get(self.cursor_query_param) is None:
            return super().paginate_queryset(queryset, request, view)
        try:
            return super().paginate_queryset(queryset, request, view)
        except (ValueError, TypeError, OverflowError, DjangoValidationError):
            # A position that the ordering field cannot hold (another ordering than the id's).
            raise self._invalid() from None
