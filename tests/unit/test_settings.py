from typing import Annotated

import pytest
from msgspec import Meta

from services.imex_agent.settings import AgentSettings, ImexSettings
from shared.bus import NatsSettings
from shared.errors import ConfigError
from shared.kube.settings import ApiSettings
from shared.runtime import RuntimeSettings
from shared.settings import Settings, describe_settings, load_settings, settings_environ


class Inner(Settings, frozen=True, kw_only=True):
    url: Annotated[str, Meta(description="Where.")] = "nats://x"
    attempts: Annotated[int, Meta(ge=-1)] = 3
    servers: tuple[str, ...] = ()


class Outer(Settings, frozen=True, kw_only=True):
    debug: bool = False
    ratio: float = 1.0
    inner: Inner = Inner()


def test_defaults_without_environment() -> None:
    assert load_settings(Outer, prefix="T_", environ={}) == Outer()


def test_values_convert_from_text_and_nest() -> None:
    settings = load_settings(
        Outer,
        prefix="T_",
        environ={
            "T_DEBUG": "true",
            "T_RATIO": "0.25",
            "T_INNER_ATTEMPTS": "-1",
            "T_INNER_SERVERS": "a, b,,c",
            "UNRELATED": "x",
        },
    )
    assert settings.debug is True and settings.ratio == 0.25
    assert settings.inner.attempts == -1
    assert settings.inner.servers == ("a", "b", "c")


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        ({"T_INNER_ATTEMPTS": "many"}, "T_INNER_ATTEMPTS='many'"),
        ({"T_INNER_ATTEMPTS": "-5"}, "T_INNER_ATTEMPTS='-5'"),
        ({"T_RATIO": "lots"}, "T_RATIO='lots'"),
    ],
)
def test_bad_values_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings(Outer, prefix="T_", environ=environ)


def test_runtime_settings_read_cdo_variables() -> None:
    settings = load_settings(
        RuntimeSettings,
        prefix="CDO_",
        environ={"CDO_NATS_URL": "nats://n:1", "CDO_HTTP_PORT": "0", "CDO_LOG_LEVEL": "DEBUG"},
    )
    assert settings.nats == NatsSettings(url="nats://n:1")
    assert settings.http_port == 0
    with pytest.raises(ConfigError, match="CDO_NATS_STREAM_STORAGE"):
        load_settings(RuntimeSettings, prefix="CDO_", environ={"CDO_NATS_STREAM_STORAGE": "tape"})


def test_every_setting_is_documented() -> None:
    rows = describe_settings(RuntimeSettings, prefix="CDO_")
    names = [name for name, _default, _doc in rows]
    assert "CDO_NATS_MAX_RECONNECT_ATTEMPTS" in names and "CDO_TRACING_SAMPLE_RATIO" in names
    undocumented = [name for name, _default, doc in rows if not doc]
    assert undocumented == []


class WithTunedDefault(Settings, frozen=True, kw_only=True):
    inner: Inner = Inner(url="nats://tuned", attempts=8)


def test_a_variable_overrides_one_field_of_a_tuned_nested_default() -> None:
    settings = load_settings(WithTunedDefault, prefix="T_", environ={"T_INNER_ATTEMPTS": "2"})
    assert settings.inner == Inner(url="nats://tuned", attempts=2)


def test_settings_environ_reads_back_as_the_same_settings_inline_groups_included() -> None:
    agent = AgentSettings(
        node_name="n1",
        address="127.0.0.9",
        api=ApiSettings(kubeconfig="/k", field_manager="mine"),
        imex=ImexSettings(server_port=51000, stop_on_exit=True),
    )
    environ = settings_environ(agent, prefix="CDO_IMEX_AGENT_")
    assert environ["CDO_IMEX_AGENT_KUBECONFIG"] == "/k"
    assert "CDO_IMEX_AGENT_API_KUBECONFIG" not in environ
    assert load_settings(AgentSettings, prefix="CDO_IMEX_AGENT_", environ=environ) == agent


class Required(Settings, frozen=True, kw_only=True):
    node_name: str
    inner: Inner = Inner()


class NestedRequired(Settings, frozen=True, kw_only=True):
    service: Required


@pytest.mark.parametrize(
    ("cls", "variable"),
    [(Required, "T_NODE_NAME"), (NestedRequired, "T_SERVICE_NODE_NAME")],
)
def test_a_required_setting_left_unset_names_its_own_variable(
    cls: type[Settings], variable: str
) -> None:
    environ = {"T_SERVICE_INNER_ATTEMPTS": "1"} if cls is NestedRequired else {}
    with pytest.raises(ConfigError) as caught:
        load_settings(cls, prefix="T_", environ=environ)
    assert str(caught.value) == f"{variable}: required, not set"
