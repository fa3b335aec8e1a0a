"""Python-level refusal of sockets in the worker, in front of the seccomp filter: a clear
``PermissionError`` for what the filter would refuse with a bare ``EACCES``.
"""

from __future__ import annotations

import errno
import sys
from typing import Any


def _child_block_network() -> None:
    """Python-level refusal with a clear message, in front of the seccomp filter (the real
    barrier, which answers a bare ``EACCES``): creating a socket of any family through
    ``socket.socket`` or ``_socket.socket``, ``connect``/``bind``, a ``socketpair`` other than
    ``AF_UNIX`` streams and name lookups raise ``PermissionError: [Errno 13] sockets are
    disabled in the sandbox (AF_UNIX): ...``. Sockets on existing descriptors (``socketpair``,
    ``fromfd``, asyncio's self-pipe) still work. The C type under the patch and ctypes bypass
    it and get the kernel's ``EACCES``."""
    import _socket
    import socket
    import types

    # socket.py calls the real _socket (e.g. _socket.socket.__init__) at call time, so the code's
    # ``import _socket`` gets a copy of the module with the refusing names instead
    raw = types.ModuleType("_socket", _socket.__doc__)
    raw.__dict__.update(_socket.__dict__)
    refusing_raw = _refusing_socket_type(_socket.socket)
    raw.__dict__.update(socket=refusing_raw, SocketType=refusing_raw,
                        socketpair=_checked_socketpair(_socket.socketpair))
    sys.modules["_socket"] = raw
    vars(socket).update(socket=_refusing_socket_type(socket.socket),  # socketpair, accept too
                        socketpair=_checked_socketpair(socket.socketpair))
    for name in (
        "create_connection",
        "create_server",
        "getaddrinfo",
        "gethostbyname",
        "gethostbyname_ex",
        "gethostbyaddr",
        "getnameinfo",
    ):
        setattr(socket, name, _refusing_call(name))
        if hasattr(raw, name):
            setattr(raw, name, _refusing_call(name))


def _socket_refusal(what: str) -> PermissionError:
    """The one error every refused socket operation raises (``what``: family or call)."""
    return PermissionError(errno.EACCES, f"sockets are disabled in the sandbox ({what}): no "
                           "network access and no host sockets; only socket.socketpair() of "
                           "AF_UNIX streams works")


def _family_name(family: int) -> str:
    import socket

    try:
        return socket.AddressFamily(socket.AF_INET if family == -1 else family).name
    except ValueError:
        return f"address family {family}"


def _kind_name(kind: int) -> str:
    import socket

    try:
        return socket.SocketKind(kind & 0xF).name  # without SOCK_NONBLOCK / SOCK_CLOEXEC
    except ValueError:
        return f"type {kind}"


def _refusing_socket_type(base: Any) -> Any:
    """A subclass of ``base`` that wraps existing descriptors only and never connects/binds."""

    def __init__(self: Any, family: int = -1, type: int = -1, proto: int = -1,
                 fileno: Any = None) -> None:
        if fileno is None:
            raise _socket_refusal(_family_name(family))
        base.__init__(self, family, type, proto, fileno)

    def connect(self: Any, *_args: Any) -> None:
        raise _socket_refusal(f"connect on {_family_name(self.family)}")

    def bind(self: Any, *_args: Any) -> None:
        raise _socket_refusal(f"bind on {_family_name(self.family)}")

    methods = {"__init__": __init__, "connect": connect, "bind": bind, "__slots__": ()}
    return type(base.__name__, (base,), methods)


def _checked_socketpair(real: Any) -> Any:
    """``real`` (``socketpair``) for ``AF_UNIX`` streams only, the pairs the filter allows."""
    import socket

    def socketpair(family: Any = None, type: int = socket.SOCK_STREAM, proto: int = 0) -> Any:
        family = socket.AF_UNIX if family is None else family
        if family != socket.AF_UNIX or type & 0xF != socket.SOCK_STREAM:
            raise _socket_refusal(f"socketpair of {_family_name(family)} {_kind_name(type)}")
        return real(family, type, proto)

    return socketpair


def _refusing_call(name: str) -> Any:
    def refuse(*_args: Any, **_kwargs: Any) -> Any:
        raise _socket_refusal(name)

    return refuse
