"""The maintenance scheduler: on schedule with a virtual clock, never overlapping, status."""

from __future__ import annotations

import itertools
import threading
from datetime import timedelta

from engram.admin.scheduler import MaintenanceScheduler
from engram.api import Api, Ctx


def test_a_year_of_virtual_time_fires_every_twelve_hours(eng, clock):
    start = clock.now()
    api = Api(eng)
    sched = MaintenanceScheduler(eng, eng.settings, api_metrics=api.metrics, clock=clock)
    api.scheduler = sched
    sched.start()
    assert sched.status()["next_run"] == (start + timedelta(hours=12)).isoformat()
    durable = eng.store("The production cluster runs in eu-west-1", importance=0.8).memory
    pinned = eng.store("The user's name is Robin", importance=0.1, pinned=True).memory
    fire_times, noise = [], []
    for step in range(1, 365 * 4 + 1):  # every 6 virtual hours for a year
        clock.advance(hours=6)
        if step % 4 == 0:
            day = step // 4
            noise.append(
                eng.store(
                    f"Scratch note {day}: rebuilt widget w{day} for test run r{day}",
                    importance=0.2,
                    resolve_conflicts=False,
                ).memory.id
            )
            if day % 10 == 0:
                eng.recall("production cluster region", limit=3)
        for report in sched.tick():
            fire_times.append(clock.now())
            assert report["applied"]

    status = sched.status()
    assert status["runs"] == 730 == len(fire_times)
    assert all(b - a == timedelta(hours=12) for a, b in itertools.pairwise(fire_times))
    assert fire_times[0] == start + timedelta(hours=12)
    assert status["next_run"] == (fire_times[-1] + timedelta(hours=12)).isoformat()
    assert status["last_report"]["finished_at"] == status["last_run"]
    # The runs did the work: old noise is gone, the used fact and the pinned one stay.
    alive = set(eng.index.row_of)
    assert durable.id in alive and pinned.id in alive
    assert len([n for n in noise if n in alive]) < 30
    assert api.metrics.pruned >= len(noise) - 30
    stats = api.memory_stats(Ctx("s"))
    assert stats["maintenance"]["runs"] == 730
    assert stats["totals"]["runs"] == 730


def test_missed_runs_coalesce_into_one(eng, clock):
    sched = MaintenanceScheduler(eng, eng.settings, clock=clock)
    sched.start()
    clock.advance(hours=11)
    assert sched.tick() == []
    clock.advance(days=3)  # six fire times passed while "asleep"
    assert len(sched.tick()) == 1
    assert sched.tick() == []
    assert sched.status()["runs"] == 1
    nxt = sched.next_run()
    assert clock.now() < nxt <= clock.now() + timedelta(hours=12)


def test_a_run_in_progress_is_never_overlapped(eng, clock):
    sched = MaintenanceScheduler(eng, eng.settings, clock=clock)
    sched.start()
    entered, release = threading.Event(), threading.Event()
    results = []

    def hold_engram():
        # A run needs the engram's lock; hold it so the first run stays in progress.
        with eng.lock:
            entered.set()
            release.wait(10)

    holder = threading.Thread(target=hold_engram)
    holder.start()
    entered.wait(10)
    first = threading.Thread(target=lambda: results.append(sched.run_once()))
    first.start()
    while not sched._run_lock.locked():  # the first run has started and is waiting
        first.join(0.01)
    assert sched.run_once() is None  # the second one is skipped, not queued
    release.set()
    holder.join()
    first.join()
    assert results[0] is not None and results[0]["applied"]
    st = sched.status()
    assert st["runs"] == 1 and st["skipped"] == 1


def test_background_mode_schedules_with_apscheduler(eng):
    sched = MaintenanceScheduler(eng, eng.settings)  # system clock: a real background scheduler
    sched.start()
    try:
        st = sched.status()
        assert st["mode"] == "background" and st["runs"] == 0 and st["interval_hours"] == 12.0
        assert st["next_run"] is not None
    finally:
        sched.shutdown()
    assert sched.status()["next_run"] is None


def test_api_runs_are_recorded(eng):
    api = Api(eng)
    api.scheduler = MaintenanceScheduler(eng, eng.settings, api_metrics=api.metrics, clock=eng.clock)
    report = api.run_maintenance(Ctx("s"))
    st = api.scheduler.status()
    assert st["runs"] == 1 and st["last_report"] is report
