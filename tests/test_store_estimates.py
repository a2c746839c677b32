"""The learned runtime history in the store (store/estimates.py), on SQLite and a real PostgreSQL
server (skipped, saying why, where its binaries are not installed): what a restart restores."""

from __future__ import annotations

import pytest

from jupyter_gpusched.core.estimates import RuntimeHistory
from jupyter_gpusched.core.model import JobSpec
from jupyter_gpusched.store import Store

pytestmark = pytest.mark.timeout(180)


def test_a_restart_restores_the_history_in_update_order(store_url):
    store = Store(store_url)
    h = RuntimeHistory()
    nb = JobSpec(notebook="dir/ünïcode notebook.ipynb", owner="u" * 200, tenant="vision", gpus=2)
    for t, seconds in enumerate((60.0, 90.5, 120.25)):
        store.runtimes.save(((k, h.runs(k)) for k in h.observe(nb, seconds)), now=1_700_000_000.0 + t)
    other = JobSpec(notebook="b.ipynb", owner="bob", tenant="nlp")
    for seconds in (5.0, 6.0):
        store.runtimes.save(((k, h.runs(k)) for k in h.observe(other, seconds)), now=1_700_000_010.0)
    store.close()

    again = Store(store_url)
    restored = RuntimeHistory()
    restored.load(again.runtimes.load(restored.max_keys))
    assert restored.estimate(nb) == h.estimate(nb)
    assert restored.estimate(other) == h.estimate(other)
    assert sorted(restored.items()) == sorted(h.items())
    # more keys than the history keeps: the oldest go, from the store too
    kept = again.runtimes.load(4)
    assert sorted(k for k, _ in kept) == sorted(k for k, _ in list(h.items())[-4:])
    assert len(again.runtimes.load(100)) == 4
    again.close()
