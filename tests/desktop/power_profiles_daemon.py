#!/usr/bin/python3
"""A stand-in power-profiles-daemon for tests: the daemon's own D-Bus interface
(net.hadess.PowerProfiles at /net/hadess/PowerProfiles: ActiveProfile read and written,
Profiles, PerformanceDegraded, PerformanceInhibited, Actions, ActiveProfileHolds, Version, and
HoldProfile/ReleaseProfile), owned on the bus DBUS_SESSION_BUS_ADDRESS names (a test's own bus,
which the program under test is given as its system bus). It changes no hardware.

    power_profiles_daemon.py [--profiles performance,balanced,power-saver] [--active balanced]

Prints `ready`, then `set PROFILE` for each change of ActiveProfile, each on its own line. It
exits when the process that started it does (its parent id changes), or on SIGTERM."""

import argparse

from gi.repository import GLib

from stand_in import say, serve

XML = """
<node>
  <interface name="net.hadess.PowerProfiles">
    <method name="HoldProfile">
      <arg name="profile" type="s" direction="in"/>
      <arg name="reason" type="s" direction="in"/>
      <arg name="application_id" type="s" direction="in"/>
      <arg name="cookie" type="u" direction="out"/>
    </method>
    <method name="ReleaseProfile"><arg name="cookie" type="u" direction="in"/></method>
    <signal name="ProfileReleased"><arg name="cookie" type="u"/></signal>
    <property name="ActiveProfile" type="s" access="readwrite"/>
    <property name="PerformanceInhibited" type="s" access="read"/>
    <property name="PerformanceDegraded" type="s" access="read"/>
    <property name="Profiles" type="aa{sv}" access="read"/>
    <property name="Actions" type="as" access="read"/>
    <property name="ActiveProfileHolds" type="aa{sv}" access="read"/>
    <property name="Version" type="s" access="read"/>
  </interface>
</node>
"""
PATH = "/net/hadess/PowerProfiles"
NAME = "net.hadess.PowerProfiles"

parser = argparse.ArgumentParser()
parser.add_argument("--profiles", default="performance,balanced,power-saver")
parser.add_argument("--active", default="balanced")
options = parser.parse_args()
profiles = options.profiles.split(",")
state = {"active": options.active}


def call(connection, sender, path, interface, method, args, invocation):
    if method == "HoldProfile":
        invocation.return_value(GLib.Variant("(u)", (1,)))
        return
    invocation.return_value(None)


def get(connection, sender, path, interface, prop):
    return {
        "ActiveProfile": GLib.Variant("s", state["active"]),
        "PerformanceInhibited": GLib.Variant("s", ""),
        "PerformanceDegraded": GLib.Variant("s", ""),
        "Profiles": GLib.Variant(
            "aa{sv}",
            [
                {"Profile": GLib.Variant("s", p), "Driver": GLib.Variant("s", "placeholder")}
                for p in profiles
            ],
        ),
        "Actions": GLib.Variant("as", []),
        "ActiveProfileHolds": GLib.Variant("aa{sv}", []),
        "Version": GLib.Variant("s", "0.23"),
    }.get(prop)


def set_property(connection, sender, path, interface, prop, value):
    if prop != "ActiveProfile":
        return False
    wanted = value.unpack()
    if wanted not in profiles:
        # The daemon refuses a profile it does not offer: the caller gets an error.
        say(f"refused {wanted}")
        return False
    state["active"] = wanted
    connection.emit_signal(
        None,
        PATH,
        "org.freedesktop.DBus.Properties",
        "PropertiesChanged",
        GLib.Variant("(sa{sv}as)", (NAME, {"ActiveProfile": GLib.Variant("s", wanted)}, [])),
    )
    say(f"set {wanted}")
    return True


serve(NAME, PATH, XML, call, get, set_property)
