from shared.runtime import Readiness


def test_ready_only_when_every_check_passes() -> None:
    readiness = Readiness()
    assert readiness.ready
    state = {"nats": False}
    readiness.add("nats", lambda: state["nats"])
    assert readiness.failing() == ["nats"]
    state["nats"] = True
    assert readiness.ready


def test_a_raising_check_means_not_ready() -> None:
    readiness = Readiness()

    def broken() -> bool:
        raise RuntimeError("x")

    readiness.add("broken", broken)
    assert readiness.failing() == ["broken"]


def test_stopping_makes_it_unready() -> None:
    readiness = Readiness()
    readiness.mark_stopping()
    assert readiness.failing() == ["stopping"]


def test_a_condition_is_reported_as_degraded_and_never_makes_it_unready() -> None:
    readiness = Readiness()
    feed = {"up": False}
    readiness.add_condition("nats", lambda: feed["up"])
    assert readiness.ready and readiness.failing() == []
    assert readiness.degraded() == ["nats"]
    feed["up"] = True
    assert readiness.degraded() == []
