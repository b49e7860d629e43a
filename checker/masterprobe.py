"""Is HOST:PORT a Spark standalone master? One RPC asks it, as Spark's own client would.

Spark's standalone client (StandaloneAppClient) tries to register three times,
20 s apart, with no setting to shorten that: a port that accepts TCP but is no
master (an HTTP server, a listener that says nothing) cost 66 s and ended in
"Cannot call methods on a stopped SparkContext". So check_master asks the port's
RpcEndpointVerifier -- the "endpoint-verifier" every Spark RPC environment
registers -- whether it has an endpoint named "Master", and waits a few seconds
for the answer.

The wire format (Spark's network-common, the same from Spark 2 to 4): a frame is
an 8-byte big-endian length (of the whole frame, these 8 bytes included), a
1-byte message type and the message. An RpcRequest (type 3) is an 8-byte request
id, a 4-byte body length and the body; the reply is an RpcResponse (type 4: the
id, a 4-byte length, the body) or an RpcFailure (type 5: the id, a 4-byte length
and a UTF-8 message). An RPC body (NettyRpcEnv's RequestMessage) is the sender's
address (absent: a false byte), the receiver's (a true byte, the host as Java
writeUTF, a 4-byte port), the endpoint's name (writeUTF), then the message,
Java-serialized; the verifier answers CheckExistence(name) with a serialized
java.lang.Boolean.
"""

from __future__ import annotations

import socket
import struct
import time

RPC_REQUEST, RPC_RESPONSE, RPC_FAILURE = 3, 4, 5
VERIFIER = "endpoint-verifier"
MASTER = "Master"  # org.apache.spark.deploy.master.Master.ENDPOINT_NAME
REQUEST_ID = 1  # the server echoes it; one request per connection
MAX_REPLY = 1 << 20  # an RpcFailure carries a stack trace: a few KiB
FOREIGN_WAIT_S = 0.2
# RpcEndpointVerifier.CheckExistence declares no serialVersionUID; this is the one
# Java computes for Spark 4's Scala 2.13 build (`serialver`). A master whose class
# differs (another Scala build) cannot read the question and answers an
# RpcFailure -- still Spark's RPC, which is accepted (probe).
_CHECK_EXISTENCE = "org.apache.spark.rpc.netty.RpcEndpointVerifier$CheckExistence"
_CHECK_EXISTENCE_UID = 5378738997755484868
_JAVA_MAGIC = b"\xac\xed\x00\x05"  # a Java serialization stream, version 5
_TC_NULL, _TC_CLASSDESC, _TC_OBJECT, _TC_STRING, _TC_ENDBLOCKDATA = b"p", b"r", b"s", b"t", b"x"
_SC_SERIALIZABLE = b"\x02"


class Unreachable(Exception):
    """No TCP connection to the address (refused, timed out, unknown host)."""


class NotAMaster(Exception):
    """The address accepts TCP but is no Spark standalone master."""


def _utf(text: str) -> bytes:
    """Java's writeUTF: a 2-byte length, then the bytes (ASCII here, where
    modified UTF-8 is UTF-8)."""
    data = text.encode()
    return struct.pack(">H", len(data)) + data


def _check_existence(name: str) -> bytes:
    """RpcEndpointVerifier.CheckExistence(name), Java-serialized: a new object of a
    new class descriptor (one String field, superclass Object: none), then the field."""
    return (_JAVA_MAGIC + _TC_OBJECT + _TC_CLASSDESC + _utf(_CHECK_EXISTENCE)
            + struct.pack(">q", _CHECK_EXISTENCE_UID) + _SC_SERIALIZABLE
            + struct.pack(">H", 1) + b"L" + _utf("name") + _TC_STRING + _utf("Ljava/lang/String;")
            + _TC_ENDBLOCKDATA + _TC_NULL + _TC_STRING + _utf(name))


def request(host: str, port: int, endpoint: str = MASTER) -> bytes:
    """The frame of an RpcRequest asking host:port's verifier for ``endpoint``."""
    body = (b"\x00" + b"\x01" + _utf(host) + struct.pack(">i", port) + _utf(VERIFIER)
            + _check_existence(endpoint))
    message = struct.pack(">bqi", RPC_REQUEST, REQUEST_ID, len(body)) + body
    return struct.pack(">q", 8 + len(message)) + message


def _read(sock: socket.socket, n: int, deadline: float, timeout: float,
          got: bytes = b"") -> bytes:
    """n bytes (after ``got``, the bytes read before); NotAMaster if the peer closes
    or stays silent until ``deadline``."""
    data = bytearray(got)
    while len(data) < len(got) + n:
        left = deadline - time.monotonic()
        if left <= 0:
            raise NotAMaster(_silent(bytes(data), timeout))
        sock.settimeout(left)
        try:
            chunk = sock.recv(len(got) + n - len(data))
        except TimeoutError:
            raise NotAMaster(_silent(bytes(data), timeout)) from None
        except OSError as e:
            raise NotAMaster(f"the connection failed: {(e.strerror or type(e).__name__).lower()}"
                             ) from None
        if not chunk:
            raise NotAMaster(f"it closed the connection{_after(bytes(data))} (no Spark RPC)")
        data += chunk
    return bytes(data)


def _shown(data: bytes) -> str:
    """The start of what the peer sent, for the message: its first line, printable."""
    line = data.split(b"\n", 1)[0].rstrip(b"\r")[:60].decode("ascii", errors="replace")
    return repr("".join(c if c.isprintable() else "?" for c in line))


def _after(data: bytes) -> str:
    return f" after sending {_shown(data)}" if data else " without answering"


def _silent(data: bytes, timeout: float) -> str:
    if data:
        return f"it sent {_shown(data)} and then nothing for {timeout:g} s (no Spark RPC)"
    return f"it accepted the connection and gave no Spark RPC answer within {timeout:g} s"


def _foreign(sock: socket.socket, data: bytes) -> NotAMaster:
    """What to say of an answer that is not Spark's: its first line (what else
    arrives within FOREIGN_WAIT_S, to show more of it than a frame's 8 bytes)."""
    sock.settimeout(FOREIGN_WAIT_S)
    try:
        data += sock.recv(64)
    except OSError:
        pass
    return NotAMaster(f"it answered {_shown(data)}, not Spark RPC")


def connect(host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to host:port within ``timeout``; Unreachable (why, in a few
    words) if there is none."""
    try:
        return socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise Unreachable("connection refused") from None
    except TimeoutError:
        raise Unreachable(f"no answer within {timeout:g} s") from None
    except socket.gaierror:
        raise Unreachable(f"unknown host {host}") from None
    except OSError as e:
        raise Unreachable((e.strerror or type(e).__name__).lower()) from None


def probe(host: str, port: int, timeout: float, endpoint: str = MASTER) -> None:
    """Return if host:port is a Spark standalone master (its verifier knows
    ``endpoint``), or a Spark RPC endpoint that could not read the question (another
    Spark build: Spark's client decides); else Unreachable or NotAMaster, each
    with why in a few words. Takes at most ``timeout`` to connect and as long
    again for the answer."""
    sock = connect(host, port, timeout)
    with sock:
        deadline = time.monotonic() + timeout
        try:
            sock.sendall(request(host, port, endpoint))
        except OSError as e:
            raise NotAMaster("it closed the connection before the question was sent "
                             f"({(e.strerror or type(e).__name__).lower()})") from None
        head = _read(sock, 8, deadline, timeout)
        (length,) = struct.unpack(">q", head)
        if not 8 + 1 + 8 + 4 <= length <= MAX_REPLY:  # length, type, id, size
            raise _foreign(sock, head)
        frame = _read(sock, length - 8, deadline, timeout, head)
        kind, request_id, size = struct.unpack(">bqi", frame[8:21])
        if (request_id != REQUEST_ID or kind not in (RPC_RESPONSE, RPC_FAILURE)
                or size != length - 21):
            raise _foreign(sock, frame)
        if kind == RPC_FAILURE:
            return  # Spark's RPC, which could not read this build's question
        answer = frame[21:]
        if not (answer.startswith(_JAVA_MAGIC) and b"java.lang.Boolean" in answer
                and answer[-1:] in (b"\x00", b"\x01")):
            raise _foreign(sock, frame)
        if answer[-1:] != b"\x01":
            raise NotAMaster(f"a Spark RPC endpoint without a {endpoint} (a worker's or an "
                             "application's port?)")
