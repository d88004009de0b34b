"""The simulator's settings: defaults, settings.TAS_SIMULATOR, TAS_SIM_* variables, validation."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from tasweb.simulator.config import MAX_NODES, SimulatorSettings, simulator_settings


def test_defaults_are_two_blocks_of_four_racks_of_eight_nodes():
    config = simulator_settings(environ={})

    assert (config.blocks, config.racks_per_block, config.nodes_per_rack) == (2, 4, 8)
    assert config.node_count == 64
    assert config.gpus_per_node == 8


def test_environment_variables_override_defaults():
    config = simulator_settings(environ={"TAS_SIM_NODES_PER_RACK": "16", "TAS_SIM_ARRIVALS_PER_MINUTE": "2.5",
                                         "TAS_SIM_SEED": "42", "TAS_SIM_TICK_SECONDS": "1"})

    assert config.nodes_per_rack == 16
    assert config.node_count == 128
    assert config.arrivals_per_minute == 2.5
    assert config.seed == 42
    assert config.tick_seconds == 1


def test_settings_dict_overrides_defaults_and_the_environment_overrides_it():
    with override_settings(TAS_SIMULATOR={"blocks": 3, "drains_per_minute": 0}):
        assert simulator_settings(environ={}).blocks == 3
        assert simulator_settings(environ={}).drains_per_minute == 0
        assert simulator_settings(environ={"TAS_SIM_BLOCKS": "5"}).blocks == 5


def test_the_largest_cluster_is_a_hundred_thousand_nodes():
    config = simulator_settings(environ={"TAS_SIM_BLOCKS": "25", "TAS_SIM_RACKS_PER_BLOCK": "125",
                                         "TAS_SIM_NODES_PER_RACK": "32"})
    assert config.node_count == MAX_NODES == 100_000

    with pytest.raises(ImproperlyConfigured, match=r"TAS_SIM_NODES_PER_RACK.*100001 nodes .*= 1 x 1 x 100001\);.*"
                                                   r"at most 100000"):
        simulator_settings(environ={"TAS_SIM_BLOCKS": "1", "TAS_SIM_RACKS_PER_BLOCK": "1",
                                    "TAS_SIM_NODES_PER_RACK": "100001"})
    with pytest.raises(ImproperlyConfigured, match=r"100050 nodes"):
        simulator_settings(environ={"TAS_SIM_BLOCKS": "2001", "TAS_SIM_RACKS_PER_BLOCK": "1",
                                    "TAS_SIM_NODES_PER_RACK": "50"})


@pytest.mark.parametrize(("environ", "message"), [
    ({"TAS_SIM_BLOCKS": "two"}, r"TAS_SIM_BLOCKS: expected an integer .*'two'"),
    ({"TAS_SIM_ARRIVALS_PER_MINUTE": "fast"}, r"TAS_SIM_ARRIVALS_PER_MINUTE: expected a number"),
    ({"TAS_SIM_NODE_FAILURES_PER_MINUTE": "-1"}, r"TAS_SIM_NODE_FAILURES_PER_MINUTE .* must not be negative"),
    ({"TAS_SIM_RACKS_PER_BLOCK": "0"}, r"TAS_SIM_RACKS_PER_BLOCK .* at least 1"),
    ({"TAS_SIM_TICK_SECONDS": "0"}, r"TAS_SIM_TICK_SECONDS .* must be positive"),
    ({"TAS_SIM_RUNTIME_MIN_SECONDS": "500"}, r"TAS_SIM_RUNTIME_MIN_SECONDS .* above runtime_max_seconds"),
    ({"TAS_SIM_TOO_BIG_FRACTION": "1.5"}, r"TAS_SIM_TOO_BIG_FRACTION .* between 0 and 1"),
])
def test_bad_values_name_the_variable(environ, message):
    with pytest.raises(ImproperlyConfigured, match=message):
        simulator_settings(environ=environ)


def test_unknown_keys_in_the_settings_dict_are_rejected():
    with override_settings(TAS_SIMULATOR={"nodes": 100}), pytest.raises(ImproperlyConfigured, match="'nodes'"):
        simulator_settings(environ={})


def test_with_overrides_validates():
    with pytest.raises(ImproperlyConfigured, match="at most 100000"):
        SimulatorSettings().with_overrides(nodes_per_rack=100_000)
