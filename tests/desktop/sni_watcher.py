#!/usr/bin/python3
"""A StatusNotifierWatcher for tests: what a desktop's tray host offers (KDE Plasma, the GNOME
AppIndicator extension, waybar, …), on the session bus, speaking the watcher's own interface
(org.kde.StatusNotifierWatcher: RegisterStatusNotifierItem/Host, RegisteredStatusNotifierItems,
IsStatusNotifierHostRegistered, ProtocolVersion and the Registered signals), with a host
registered. Each item registered is printed as `registered BUS-NAME PATH` on its own line.
It exits when the process that started it does (its parent id changes), or on SIGTERM."""

from gi.repository import GLib

from stand_in import say, serve

XML = """
<node>
  <interface name="org.kde.StatusNotifierWatcher">
    <method name="RegisterStatusNotifierItem"><arg name="service" type="s" direction="in"/></method>
    <method name="RegisterStatusNotifierHost"><arg name="service" type="s" direction="in"/></method>
    <property name="RegisteredStatusNotifierItems" type="as" access="read"/>
    <property name="IsStatusNotifierHostRegistered" type="b" access="read"/>
    <property name="ProtocolVersion" type="i" access="read"/>
    <signal name="StatusNotifierItemRegistered"><arg type="s"/></signal>
    <signal name="StatusNotifierItemUnregistered"><arg type="s"/></signal>
    <signal name="StatusNotifierHostRegistered"/>
  </interface>
</node>
"""
PATH = "/StatusNotifierWatcher"
NAME = "org.kde.StatusNotifierWatcher"
items = []


def call(connection, sender, path, interface, method, args, invocation):
    if method == "RegisterStatusNotifierItem":
        service = args.unpack()[0]
        # An item may give its path alone: it is then at the sender's unique name.
        bus_name, item_path = (sender, service) if service.startswith("/") else (service, "/StatusNotifierItem")
        entry = f"{bus_name}{item_path}"
        if entry not in items:
            items.append(entry)
        invocation.return_value(None)
        connection.emit_signal(None, PATH, NAME, "StatusNotifierItemRegistered", GLib.Variant("(s)", (entry,)))
        say(f"registered {bus_name} {item_path}")
        return
    invocation.return_value(None)


def get(connection, sender, path, interface, prop):
    return {
        "RegisteredStatusNotifierItems": GLib.Variant("as", items),
        "IsStatusNotifierHostRegistered": GLib.Variant("b", True),
        "ProtocolVersion": GLib.Variant("i", 0),
    }.get(prop)


serve(NAME, PATH, XML, call, get)
