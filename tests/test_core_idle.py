"""Idle reclaim rules for GPU kernels (core/idle.py): pure, on a hand-made clock."""

from __future__ import annotations

from jupyter_gpusched.core.idle import IdleAction, IdleClock, IdlePolicy, idle_action

P = IdlePolicy(timeout=100.0, warn_for=50.0, max_keep=120.0)
NONE, WARN, RECLAIM = IdleAction.NONE, IdleAction.WARN, IdleAction.RECLAIM


def test_warned_after_the_timeout_then_reclaimed_after_the_warning():
    c = IdleClock(idle_since=0.0)
    assert idle_action(c, 99.0, False, True, P) is NONE
    assert idle_action(c, 100.0, False, True, P) is WARN
    c.warned_at = 100.0
    assert idle_action(c, 149.0, False, True, P) is NONE
    assert idle_action(c, 150.0, False, True, P) is RECLAIM


def test_only_while_someone_waits_by_default():
    c = IdleClock(idle_since=0.0)
    assert idle_action(c, 10_000.0, False, False, P) is NONE
    assert idle_action(c, 10_000.0, False, True, P) is WARN  # long idle: warned as soon as someone waits
    c.warned_at = 10_000.0
    assert idle_action(c, 10_010.0, False, False, P) is NONE and c.warned_at is None  # nobody waits: countdown off
    always = IdlePolicy(timeout=100.0, warn_for=50.0, only_when_waiting=False)
    assert idle_action(IdleClock(0.0), 100.0, False, False, always) is WARN


def test_a_busy_kernel_is_never_reclaimed_and_activity_voids_the_warning():
    c = IdleClock(idle_since=0.0, warned_at=100.0)
    assert idle_action(c, 1_000.0, True, True, P) is NONE
    assert (c.idle_since, c.warned_at) == (1_000.0, None)
    c.activity(1_050.0)
    assert idle_action(c, 1_149.0, False, True, P) is NONE


def test_keep_restarts_the_clock_within_its_allowance():
    c = IdleClock(idle_since=0.0, warned_at=100.0)
    assert c.keep(110.0, P) == 110.0 and c.warned_at is None
    assert idle_action(c, 200.0, False, True, P) is NONE
    assert c.keep(300.0, P) == 10.0  # 120 s in all
    assert c.keep(400.0, P) == 0.0
    assert idle_action(c, 400.0, False, True, P) is WARN


def test_off_when_no_timeout():
    assert idle_action(IdleClock(0.0), 1e9, False, True, IdlePolicy()) is NONE
