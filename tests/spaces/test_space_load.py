"""A Space holds its visitors (issue 60): one press scores at a time, a bounded number wait, and
every other visitor is refused at once with the busy message; each answer is the metric's
scores, each press shows its own warnings and no other's, and the server's memory does not grow
with the visitors. docs/speed.md's latencies of 12 visitors at once come from
``python tests/spaces/space_latency.py``."""

from __future__ import annotations

import threading
import time

import pytest
from spaceserver import APPS, SPACES, import_app, resident_mb, serve

from moverkit.functional import twmd

pytest.importorskip("gradio")

VISITORS = 6
QUEUE = 2  # so that 6 visitors, one scoring and two waiting, leave three refused
PAIRS = [
    ("the cat sat on the mat", "a cat was sitting on the mat"),
    ("stocks fell sharply on monday", "shares dropped on monday"),
    ("he went home early", "he left for home early"),
    ("a new law was passed", "parliament passed a new law"),
    ("it rained all day", "rain fell all day long"),
    ("the museum opens at nine", "doors open at nine o'clock"),
]


@pytest.mark.parametrize("name", APPS)
def test_each_card_states_the_queue(name):
    from moverkit.demo.app import CONCURRENCY_LIMIT, MAX_QUEUE

    card = (SPACES / name / "README.md").read_text(encoding="utf-8")
    assert CONCURRENCY_LIMIT == 1 and "One press scores at a time" in card
    assert f"up to {MAX_QUEUE} more wait" in card and "This application is currently busy. Please try again." in card


@pytest.fixture
def held_space(monkeypatch):
    """The twmd Space served with a queue of :data:`QUEUE`, whose presses each wait for
    ``release`` once scoring starts (``entered``): which visitors wait and which are refused is
    then decided, not a race."""
    from moverkit.demo import app as page

    entered, release = threading.Event(), threading.Event()
    scoring = page.score

    def held(*args, **kwargs):
        entered.set()
        assert release.wait(timeout=60)
        return scoring(*args, **kwargs)

    monkeypatch.setattr(page, "MAX_QUEUE", QUEUE)
    monkeypatch.setattr(page, "score", held)
    app = import_app(SPACES / "twmd" / "app.py")
    url = serve(app.demo)
    yield url, entered, release
    release.set()
    app.demo.close()


def test_a_space_answers_or_refuses_each_visitor_and_holds_its_memory(held_space):
    from gradio_client import Client
    from gradio_client.utils import QueueError

    url, entered, release = held_space
    clients = [Client(url, verbose=False, analytics_enabled=False) for _ in range(VISITORS)]
    before = resident_mb()

    def press(i):
        prediction, reference = PAIRS[i]
        return clients[i].submit(predictions_text=prediction, references_text=reference, api_name="/score")

    jobs = [press(0)]
    assert entered.wait(timeout=30), "the first press never started scoring"
    jobs += [press(i) for i in range(1, VISITORS)]
    refused_at_once = VISITORS - 1 - QUEUE
    deadline = time.monotonic() + 30
    while sum(job.done() for job in jobs) < refused_at_once and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sum(job.done() for job in jobs) == refused_at_once  # the others wait, none has scored
    release.set()

    answered, refused = {}, []
    for i, job in enumerate(jobs):
        try:
            answered[i] = job.result(timeout=120)
        except QueueError as error:
            refused.append(str(error))
    assert 0 in answered and len(answered) == 1 + QUEUE
    assert refused == ["Queue is full! Please try again."] * refused_at_once
    for i, (_, table, hashcode, *_) in answered.items():
        prediction, reference = PAIRS[i]
        expected = twmd([prediction], [reference])
        assert table["data"][0][1] == round(expected["twmd"][0], 4) and hashcode == expected["hashcode"]
    assert resident_mb() - before < 200  # measured: a few MB


def test_each_press_shows_its_own_warnings(monkeypatch, running_app):
    """Two presses at once, in Gradio's worker threads: the one with an empty prediction gets the
    metric's warning as its toast, the other none."""
    import gradio as gr

    app, _ = running_app("sbertscore")
    (api,) = [fn for fn in app.demo.fns.values() if fn.api_name == "score"]
    shown, start = {}, threading.Barrier(2)
    monkeypatch.setattr(
        gr, "Warning", lambda message, *_, **__: shown.setdefault(threading.current_thread().name, []).append(message)
    )
    presses = {
        "empty": ("the cat sat on the mat\n\nit may snow", "a cat sat on the mat\nan empty prediction\nsnow is coming"),
        "full": ("the cat sat on the mat\nit may snow", "a cat sat on the mat\nsnow is coming"),
    }

    def press(name):
        start.wait(timeout=30)
        api.fn(*presses[name])

    threads = [threading.Thread(target=press, args=(name,), name=name) for name in presses]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert list(shown) == ["empty"] and len(shown["empty"]) == 1 and "hold no sentence" in shown["empty"][0]
