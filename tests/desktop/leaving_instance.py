#!/usr/bin/python3
"""A Wattbar window on its way out, for tests: it owns the single-instance name the windows use
on the session bus (tauri-plugin-single-instance: the app's identifier and `.SingleInstance`,
interface org.SingleInstance.DBus) and, asked to take a launch's arguments, says `asked` and
leaves without answering, as a window quitting that very moment does. It exits too when the
process that started it does, or on SIGTERM."""

import os

from stand_in import say, serve

XML = """
<node>
  <interface name="org.SingleInstance.DBus">
    <method name="ExecuteCallback">
      <arg name="argv" type="as" direction="in"/>
      <arg name="cwd" type="s" direction="in"/>
    </method>
  </interface>
</node>
"""
NAME = "dev.wattbar.Wattbar.SingleInstance"
PATH = "/dev/wattbar/Wattbar/SingleInstance"


def call(connection, sender, path, interface, method, args, invocation):
    say("asked")
    os._exit(0)


serve(NAME, PATH, XML, call, lambda *_: None)
