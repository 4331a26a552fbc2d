from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    """Stable pages over growing data: ordered by the primary key."""

    ordering = "id"
    page_size_query_param = "page_size"
    max_page_size = 1000
