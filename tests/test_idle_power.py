"""Idle and power probes: parsing of recorded macOS output, the Linux fallback, and the pure conditions."""
from __future__ import annotations

import time

import pytest

from app.services.platform import (linux_on_ac, on_ac_power, parse_hid_idle_seconds, parse_pmset_on_ac,
                          system_idle_seconds)
from core.conditions import ActivityTracker, CachedProbe, combined_idle, in_quiet_hours, parse_hhmm

# The shape `ioreg -c IOHIDSystem` prints on an Apple Silicon Mac (macOS 14), trimmed to the IOHIDSystem entry.
IOREG_OUTPUT = """\
+-o Root  <class IORegistryEntry, id 0x100000100, retain 30>
  +-o J314sAP  <class IOPlatformExpertDevice, id 0x100000212, registered, matched, active, busy 0 (67003 ms), retain 41>
    +-o AppleARMPE  <class AppleARMPE, id 0x100000213, registered, matched, active, busy 0 (64925 ms), retain 22>
      +-o IOHIDSystem  <class IOHIDSystem, id 0x1000005d4, registered, matched, active, busy 0 (0 ms), retain 27>
          {
            "IOClass" = "IOHIDSystem"
            "HIDIdleTime" = 48213674125
            "HIDParameters" = {"HIDClickTime"=500000000,"HIDKeyRepeat"=83333333}
            "IOProviderClass" = "IOResources"
          }
"""

PMSET_AC = """Now drawing from 'AC Power'
 -InternalBattery-0 (id=18284643)\t100%; charged; 0:00 remaining present: true
"""
PMSET_BATTERY = """Now drawing from 'Battery Power'
 -InternalBattery-0 (id=18284643)\t87%; discharging; 5:12 remaining present: true
"""
PMSET_DESKTOP = "Now drawing from 'AC Power'\n"
PMSET_UPS = ("Now drawing from 'UPS Power'\n"
             " -CP1500PFCLCDa (id=5308416)\t100%; discharging; (no estimate) present: true\n")


def test_hid_idle_time_is_parsed_from_nanoseconds():
    assert parse_hid_idle_seconds(IOREG_OUTPUT) == pytest.approx(48.213674125)
    two = IOREG_OUTPUT + '"HIDIdleTime" = 2000000000\n'
    assert parse_hid_idle_seconds(two) == pytest.approx(2.0)  # the most recent input wins
    assert parse_hid_idle_seconds("") is None
    assert parse_hid_idle_seconds("garbage") is None


def test_pmset_power_source():
    assert parse_pmset_on_ac(PMSET_AC) is True
    assert parse_pmset_on_ac(PMSET_DESKTOP) is True
    assert parse_pmset_on_ac(PMSET_BATTERY) is False
    assert parse_pmset_on_ac(PMSET_UPS) is False
    assert parse_pmset_on_ac("pmset: command failed") is None


def test_probes_on_macos_use_their_commands():
    calls = []

    def fake_run(argv):
        calls.append(argv[0])
        return {"ioreg": IOREG_OUTPUT, "pmset": PMSET_BATTERY}[argv[0]]
    assert system_idle_seconds(platform="darwin", run=fake_run) == pytest.approx(48.213674125)
    assert on_ac_power(platform="darwin", run=fake_run) is False
    assert calls == ["ioreg", "pmset"]
    assert on_ac_power(platform="darwin", run=lambda argv: None) is None  # pmset missing: unknown


def test_linux_fallbacks(tmp_path):
    assert system_idle_seconds(platform="linux") is None
    assert linux_on_ac(tmp_path / "missing") is None
    ac = tmp_path / "AC"
    ac.mkdir()
    (ac / "type").write_text("Mains\n")
    (ac / "online").write_text("0\n")
    bat = tmp_path / "BAT0"
    bat.mkdir()
    (bat / "type").write_text("Battery\n")
    assert on_ac_power(platform="linux", power_supply_dir=tmp_path) is False
    (ac / "online").write_text("1\n")
    assert on_ac_power(platform="linux", power_supply_dir=tmp_path) is True
    assert on_ac_power(platform="win32") is None


def test_the_real_probes_run_here():
    # On this Linux box: no ioreg; power from sysfs or unknown. Either way they return without raising.
    assert system_idle_seconds() is None or system_idle_seconds() >= 0
    assert on_ac_power() in (True, False, None)


def test_activity_and_combined_idle(clock):
    tracker = ActivityTracker(clock=clock)
    clock.advance(30)
    assert tracker.idle_seconds() == 30
    idle = combined_idle(tracker.idle_seconds, lambda: None)
    assert idle() == 30
    assert combined_idle(tracker.idle_seconds, lambda: 5.0)() == 5.0  # typing in another app counts
    tracker.touch()
    assert idle() == 0
    assert combined_idle(lambda: None)() == 0.0  # nothing known: treat the user as present


def test_cached_probe_runs_at_most_once_per_ttl(clock):
    calls = []
    probe = CachedProbe(lambda: calls.append(1) or len(calls), ttl=2.0, clock=clock)
    assert probe() == 1 and probe() == 1
    clock.advance(2)
    assert probe() == 2


def test_quiet_hours_wrap_midnight():
    def at(h, m=0):
        return time.struct_time((2026, 1, 1, h, m, 0, 3, 1, 0))
    assert in_quiet_hours(at(1), "01:00", "06:00")
    assert in_quiet_hours(at(5, 59), "01:00", "06:00")
    assert not in_quiet_hours(at(6), "01:00", "06:00")
    assert not in_quiet_hours(at(0, 59), "01:00", "06:00")
    assert in_quiet_hours(at(23, 30), "23:00", "02:00") and in_quiet_hours(at(1), "23:00", "02:00")
    assert not in_quiet_hours(at(12), "23:00", "02:00")
    assert not in_quiet_hours(at(3), "03:00", "03:00")
    assert parse_hhmm("24:00") == 1440
    for bad in ("25:00", "aa", "10:75"):
        with pytest.raises(ValueError):
            parse_hhmm(bad)


def test_the_apps_environment_runs_the_system_probes_sparingly(monkeypatch, db):
    import app.services.platform as platform
    from app.services.scheduling import default_environment
    calls = {"ioreg": 0, "pmset": 0}

    def idle():
        calls["ioreg"] += 1
        return 600.0

    def power():
        calls["pmset"] += 1
        return True
    monkeypatch.setattr(platform, "system_idle_seconds", idle)
    monkeypatch.setattr(platform, "on_ac_power", power)
    activity = ActivityTracker(clock=lambda: 1000.0)
    env = default_environment(db, activity)
    for _ in range(20):  # a running job asks this often between two training steps
        env.idle_seconds(), env.on_ac_power()
    assert calls == {"ioreg": 1, "pmset": 1}
    assert env.idle_seconds() == 0.0  # the app's own input, seen at once: the user is here
