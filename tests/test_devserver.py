"""`manage.py runserver` (`make run`) answers kept-alive requests without Nagle's 40 ms stall."""

from __future__ import annotations

import http.client
import socket
import threading

from django.core.management import get_commands, load_command_class
from django.core.servers.basehttp import WSGIRequestHandler

from config.devserver.management.commands.runserver import NoDelayWSGIServer


def test_runserver_is_ours_and_keeps_whitenoises_static_files():
    assert get_commands()["runserver"] == "config.devserver"
    command = load_command_class("config.devserver", "runserver")
    assert command.server_cls is NoDelayWSGIServer
    # WhiteNoise's wrapper, below ours, still turns Django's own static handler off.
    assert command.create_parser("manage.py", "runserver").get_default("use_static_handler") is False


def _app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
    return [b"ok"]


def test_each_connection_it_accepts_has_tcp_nodelay():
    server = NoDelayWSGIServer(("127.0.0.1", 0), WSGIRequestHandler)
    server.set_app(_app)
    seen = []
    get_request = server.get_request

    def spy():
        conn, address = get_request()
        seen.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        return conn, address

    server.get_request = spy
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        client = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
        for _ in range(2):  # one kept-alive connection, as a browser's
            client.request("GET", "/")
            response = client.getresponse()
            assert (response.status, response.read()) == (200, b"ok")
        client.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert seen and all(seen)
