"""`manage.py runserver` (what `make run` serves) with TCP_NODELAY on every connection.

Django's development server writes a response's headers and its body in separate small
sends. On a kept-alive connection, which is what a browser uses, Nagle's algorithm holds
the body back until the client acknowledges the headers, and the client delays that
acknowledgement by up to 40 ms: every page and htmx fragment took 40-50 ms longer than
its work (gunicorn, in production, sets TCP_NODELAY itself). Everything else is the
command below it in INSTALLED_APPS: WhiteNoise's, which serves static files as
production does, over django.contrib.staticfiles'.
"""

from __future__ import annotations

import socket

from django.core.servers.basehttp import WSGIServer
from whitenoise.runserver_nostatic.management.commands.runserver import Command as RunserverCommand


class NoDelayWSGIServer(WSGIServer):
    def get_request(self):
        conn, address = super().get_request()
        if conn.family in (socket.AF_INET, socket.AF_INET6):
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn, address


class Command(RunserverCommand):
    server_cls = NoDelayWSGIServer
