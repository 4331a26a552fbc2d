"""JSON request bodies through lib.safejson: hostile depth, NUL and lone surrogates are a 400, not a 500.

The parser bounds the depth of the whole body; NULs and lone surrogates are refused by the field that holds
them (DRF's CharField validators, SafeJSONField below), so the 400 names the field."""

from __future__ import annotations

from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from lib.safejson import JSONError, check_value, loads


class BoundedJSONParser(JSONParser):
    """DRF's JSONParser with lib.safejson's rules. The body is read whole: the request size limit
    (config.middleware.RequestLimitsMiddleware) has bounded it before any parser runs."""

    def parse(self, stream, media_type=None, parser_context=None):
        raw = stream.read() if stream is not None else b""
        if not raw:
            raise ParseError("The request body is empty; send a JSON object.")
        try:
            return loads(raw, check_strings=False)
        except JSONError as exc:
            raise ParseError(str(exc)) from None


class SafeJSONField(serializers.JSONField):
    """A JSONField whose value may arrive as text (a multipart form's field), parsed by lib.safejson.
    A value that arrives parsed came through BoundedJSONParser, which bounded its depth; its strings are
    checked here, so a NUL or a lone surrogate is this field's error."""

    def to_internal_value(self, data):
        if isinstance(data, str | bytes) and (self.binary or getattr(data, "is_json_string", False)):
            try:
                return loads(data)
            except JSONError as exc:
                raise serializers.ValidationError(str(exc)) from None
        try:
            check_value(data)
        except JSONError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return super().to_internal_value(data)
