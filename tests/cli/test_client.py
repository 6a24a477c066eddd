"""app/cli/client.py and the CLI on it, against a real `rearrange serve`: answers, the service's
refusals in one line (exit 1), and no answer at all (exit 3, naming the URL and why)."""
from __future__ import annotations

import contextlib
import http.server
import io
import socket
import threading

import pytest

from app.cli.client import Client, Refused, Unreachable
from app.cli.main import main
from bench.replicas import free_port
from tests.api.test_live_server import start_server


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    proc, base, _ = start_server(tmp_path_factory.mktemp("client"),
                                 REARRANGE_ADMIN_TOKENS="tns:t,viewer:v:read")
    yield base
    proc.terminate()
    proc.wait(10)


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_the_typed_client_answers_and_refuses(live):
    with Client(live, "t") as client:
        page = client.rerank({"request_id": "q", "documents": [
            {"id": "a", "url": "https://a.example/", "score": 1}]})
        assert page["request_id"] == "q" and page["documents"][0]["id"] == "a"
        added = client.add_entry({"scope": "host", "value": "c.example", "reason": "r"})
        assert client.lookup("https://c.example/x")["banned"]
        assert b"c.example" in client.export("ndjson")
        assert client.remove_entry(added["entry"]["id"], "appeal")["removed"]["id"]
        with pytest.raises(Refused) as refused:
            client.add_entry({"scope": "planet", "value": "x", "reason": "r"})
    assert refused.value.status == 422 and refused.value.body["field"] == "body.scope"
    with Client(live) as anonymous, pytest.raises(Refused) as refused:
        anonymous.config()
    assert str(refused.value) == "HTTP 401: Authorization: Bearer token required"


def test_the_cli_does_its_calls_through_the_client(live):
    code, out, _ = cli("banlist", "--url", live, "--token", "t", "add", "host", "b.example",
                       "--reason", "malware")
    assert code == 0 and "banlist version" in out
    code, out, _ = cli("banlist", "--url", live, "lookup", "https://b.example/x")
    assert code == 0 and "BANNED" in out
    code, out, err = cli("config", "--url", live, "--token", "v", "versions")
    assert code == 0 and "VERSION" in out, err


@pytest.mark.parametrize(("argv", "line"), [
    (("--token", "v", "add", "host", "x.example", "--reason", "r"),
     "refused: HTTP 403: Authorization: the token of viewer is read-only"),
    (("--token", "t", "add", "domain", "1.2.3.4", "--reason", "r"), "refused: HTTP 422: value: "),
    (("--token", "t", "remove", "99999", "--reason", "r"),
     "refused: HTTP 404: id: no active entry '99999'"),
])
def test_a_refusal_is_one_line_naming_field_and_problem_exit_1(live, argv, line):
    code, out, err = cli("banlist", "--url", live, *argv)
    assert code == 1 and out == "" and err.startswith(line), err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_nothing_listening_is_exit_3_connection_refused():
    base = f"http://127.0.0.1:{free_port()}"
    for argv in (("banlist", "--url", base, "lookup", "https://a.example/"),
                 ("config", "--url", base, "show")):
        code, out, err = cli(*argv)
        assert (code, out, err) == (3, "", f"cannot reach {base}: connection refused\n")


def test_a_service_that_never_answers_is_exit_3_after_the_timeout():
    with socket.socket() as listening:  # accepts (the kernel's backlog) and never answers
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        base = f"http://127.0.0.1:{listening.getsockname()[1]}"
        code, _, err = cli("config", "--url", base, "--timeout", "0.3", "versions")
    assert (code, err) == (3, f"cannot reach {base}: no answer within 0.3 s\n")


def test_the_timeout_is_seconds_or_a_duration_as_the_other_flags_take(capsys):
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        base = f"http://127.0.0.1:{listening.getsockname()[1]}"
        code, _, err = cli("config", "--url", base, "--timeout", "1s", "versions")
    assert (code, err) == (3, f"cannot reach {base}: no answer within 1 s\n")
    for bad in ("soon", "0", "-1", "inf"):
        with pytest.raises(SystemExit) as usage:
            main(["config", "--url", base, "--timeout", bad, "versions"])
        assert usage.value.code == 2 and "--timeout" in capsys.readouterr().err


def test_a_proxy_s_error_page_is_a_refusal_in_one_line():
    class Gateway(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = b"<html><body>502 Bad Gateway\n</body></html>"
            self.send_response(502)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        code, _, err = cli("banlist", "--url", base, "lookup", "https://a.example/")
    finally:
        server.shutdown()
        server.server_close()
    assert code == 1 and err.startswith("refused: HTTP 502: <html>") and err.count("\n") == 1


def test_srm_names_an_unreachable_service(tmp_path):
    url = f"http://127.0.0.1:{free_port()}/metrics"
    code, _, err = cli("experiments", "srm", "--url", url)
    assert code == 3 and err == f"cannot reach {url}: connection refused\n"


def test_unreachable_says_why_for_a_name_that_does_not_resolve():
    with pytest.raises(Unreachable) as exc:
        Client("http://no-such-host.invalid:8080").config()
    assert str(exc.value).startswith("cannot reach http://no-such-host.invalid:8080: ")
