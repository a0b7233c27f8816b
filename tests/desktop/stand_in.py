"""What the tests' stand-ins for desktop services share: their well-known name owned on the bus
DBUS_SESSION_BUS_ADDRESS names, one object served, what they do said line by line on stdout, and
an end with the process that started them (its parent id changes) or on SIGTERM."""

import os
import signal
import sys

from gi.repository import Gio, GLib


def say(line):
    # Whoever started it may have stopped reading: the stand-in goes on all the same.
    try:
        print(line, flush=True)
    except (BrokenPipeError, ValueError):
        pass


def serve(name, path, xml, call, get, set_property=None):
    """Owns `name` and serves the interface in `xml` at `path` until the end; says `ready` once
    the name is owned."""
    parent = os.getppid()
    loop = GLib.MainLoop()
    owned = []

    def bus_acquired(connection, _name):
        info = Gio.DBusNodeInfo.new_for_xml(xml).interfaces[0]
        connection.register_object(path, info, call, get, set_property)

    def name_acquired(_connection, _name):
        owned.append(True)
        say("ready")

    def name_lost(_connection, _name):
        # Lost after it was owned: the bus is going away with the test run.
        if not owned:
            print(f"cannot own {name}: another one runs", file=sys.stderr, flush=True)
        loop.quit()

    def orphaned():
        if os.getppid() != parent:
            loop.quit()
            return False
        return True

    signal.signal(signal.SIGTERM, lambda *_: loop.quit())
    Gio.bus_own_name(Gio.BusType.SESSION, name, Gio.BusNameOwnerFlags.NONE, bus_acquired, name_acquired, name_lost)
    GLib.timeout_add(500, orphaned)
    loop.run()
