"""The topology tree of a TAS flavor: which nodes it holds and how domains are named."""

from __future__ import annotations

from .factories import (
    BLOCK,
    HOSTNAME,
    RACK,
    cluster_state,
    flavor_snapshot,
    grid,
    node,
    parse_one,
    resource_flavor,
    tas_setup,
    topology,
)


def tree_of(objects: list[dict]):
    return flavor_snapshot(objects).tree


class TestDomains:
    def test_levels_from_the_topology(self):
        tree = tree_of(tas_setup() + grid())
        assert tree.level_keys == (BLOCK, RACK, HOSTNAME)
        assert tree.lowest_is_node
        assert [len(level) for level in tree.levels] == [2, 4, 8]

    def test_rack_values_are_unique_only_within_their_block(self):
        tree = tree_of(tas_setup() + grid(blocks=2, racks=2, nodes=2))
        assert tree.levels[0].ids == ["b1", "b2"]
        # both blocks have a rack "r1": two different domains
        assert tree.levels[1].ids == ["b1,r1", "b1,r2", "b2,r1", "b2,r2"]
        assert tree.levels[1].values == [("b1", "r1"), ("b1", "r2"), ("b2", "r1"), ("b2", "r2")]

    def test_hostname_leaves_are_keyed_by_hostname(self):
        tree = tree_of(tas_setup() + grid(blocks=1, racks=2, nodes=2))
        assert tree.leaves.ids == ["b1-r1-n1", "b1-r1-n2", "b1-r2-n1", "b1-r2-n2"]
        assert tree.leaves.values[2] == ("b1", "r2", "b1-r2-n1")
        assert tree.leaf_for_values(["b1-r2-n1"]) == 2
        assert tree.leaf_for_values(["nowhere"]) is None

    def test_parents_and_children(self):
        tree = tree_of(tas_setup() + grid(blocks=2, racks=2, nodes=2))
        b2 = tree.global_index(0, "b2")
        b2_r1 = tree.global_index(1, "b2,r1")
        assert [tree.id_of[c] for c in tree.children_of[b2]] == ["b2,r1", "b2,r2"]
        assert [tree.id_of[c] for c in tree.children_of[b2_r1]] == ["b2-r1-n1", "b2-r1-n2"]
        leaf = tree.leaf_global(tree.leaf_for_values(["b2-r1-n2"]))
        assert tree.parent_of[leaf] == b2_r1 and tree.parent_of[b2_r1] == b2 and tree.parent_of[b2] == -1
        assert tree.ancestor(2, tree.leaf_for_values(["b2-r1-n2"]), 0) == 1

    def test_leaves_under_a_domain_at_every_level(self):
        tree = tree_of(tas_setup() + grid(blocks=2, racks=2, nodes=3))
        leaves = tree.leaves.ids
        assert [leaves[i] for i in tree.leaves_under(0, 1)] == [f"b2-r{r}-n{n}" for r in (1, 2) for n in (1, 2, 3)]
        rack = tree.levels[1].index_by_id["b2,r1"]
        assert [leaves[i] for i in tree.leaves_under(1, rack)] == ["b2-r1-n1", "b2-r1-n2", "b2-r1-n3"]
        leaf = tree.leaf_for_values(["b1-r2-n3"])
        assert list(tree.leaves_under(2, leaf)) == [leaf]

    def test_domains_are_ordered_by_values_not_by_input_order(self):
        nodes = [node("z", block="b2", rack="r1"), node("y", block="b1", rack="r2"), node("x", block="b1", rack="r1")]
        tree = tree_of(tas_setup() + nodes)
        assert tree.levels[1].ids == ["b1,r1", "b1,r2", "b2,r1"]
        assert tree.leaves.ids == ["x", "y", "z"]

    def test_lowest_level_other_than_hostname_groups_nodes(self):
        objects = tas_setup(levels=[BLOCK, RACK]) + grid(blocks=1, racks=2, nodes=3)
        tree = tree_of(objects)
        assert not tree.lowest_is_node
        assert tree.leaves.ids == ["b1,r1", "b1,r2"]
        assert [sorted(n.name for n in group) for group in tree.leaf_nodes] == [
            ["b1-r1-n1", "b1-r1-n2", "b1-r1-n3"],
            ["b1-r2-n1", "b1-r2-n2", "b1-r2-n3"],
        ]
        assert tree.leaf_for_values(["b1", "r2"]) == 1


class TestWhichNodes:
    def test_only_ready_schedulable_labelled_nodes_of_the_flavor(self):
        pool = {"pool": "tas"}
        objects = [
            topology(),
            resource_flavor(node_labels=pool),
            node("good-1", block="b1", rack="r1", labels=pool),
            node("good-2", block="b1", rack="r2", labels=pool),
            node("no-rack", block="b1", labels=pool),
            node("no-hostname", block="b1", rack="r1", hostname=False, labels=pool),
            node("not-ready", block="b1", rack="r1", labels=pool, ready="False"),
            node("ready-unknown", block="b1", rack="r1", labels=pool, ready="Unknown"),
            node("no-condition", block="b1", rack="r1", labels=pool, ready=None),
            node("cordoned", block="b1", rack="r1", labels=pool, unschedulable=True),
            node("deleted", block="b1", rack="r1", labels=pool, deleted=True),
            node("other-pool", block="b1", rack="r1", labels={"pool": "cpu"}),
            node("no-pool", block="b1", rack="r1"),
        ]
        state = cluster_state(objects)
        tree = state.tas_snapshots["tas-flavor"].tree
        assert sorted(tree.node_to_leaf) == ["good-1", "good-2"]
        assert tree.levels[1].ids == ["b1,r1", "b1,r2"]
        # what keeps the others out, as why-pending counts them
        census = state.node_census(state.flavors["tas-flavor"], tree.level_keys)
        assert (census.nodes_of_flavor, census.missing_level_label, census.not_ready, census.unschedulable) == \
            (9, 2, 4, 1)
        # and again once a node changes (the count is kept between changes)
        state.upsert_node(parse_one(node("good-2", block="b1", rack="r2", labels=pool, ready="False")))
        census = state.node_census(state.flavors["tas-flavor"], tree.level_keys)
        assert (census.nodes_of_flavor, census.not_ready) == (9, 5)
        state.delete_node("cordoned")
        census = state.node_census(state.flavors["tas-flavor"], tree.level_keys)
        assert (census.nodes_of_flavor, census.unschedulable) == (8, 0)

    def test_flavor_without_node_labels_takes_every_labelled_node(self):
        objects = [*tas_setup(), node("a", block="b1", rack="r1", labels={"pool": "x"}),
                   node("b", block="b1", rack="r1", labels={"pool": "y"})]
        assert sorted(tree_of(objects).node_to_leaf) == ["a", "b"]

    def test_each_flavor_has_its_own_tree(self):
        objects = [
            topology(),
            resource_flavor("gpu", node_labels={"pool": "gpu"}),
            resource_flavor("cpu", node_labels={"pool": "cpu"}),
            node("g1", block="b1", rack="r1", labels={"pool": "gpu"}),
            node("c1", block="b1", rack="r1", labels={"pool": "cpu"}),
            node("c2", block="b2", rack="r1", labels={"pool": "cpu"}),
        ]
        snapshots = cluster_state(objects).tas_snapshots
        assert sorted(snapshots["gpu"].tree.node_to_leaf) == ["g1"]
        assert sorted(snapshots["cpu"].tree.node_to_leaf) == ["c1", "c2"]
        assert snapshots["cpu"].tree.levels[0].ids == ["b1", "b2"]

    def test_flavor_naming_a_missing_topology_has_no_snapshot(self):
        objects = [topology(), resource_flavor("lost", topology_name="elsewhere"), node("a", block="b1", rack="r1")]
        assert "lost" not in cluster_state(objects).tas_snapshots

    def test_flavor_without_topology_is_not_tas(self):
        objects = [topology(), resource_flavor("plain", topology_name=None), node("a", block="b1", rack="r1")]
        assert cluster_state(objects).tas_snapshots == {}


class TestOrder:
    """Kueue orders domains as strings; a display may ask for numbers compared as numbers."""

    @staticmethod
    def nodes(blocks: int = 11, racks: int = 2) -> list:
        from scheduler.parse import Where, parse_node

        objs = [node(f"b{b}-r{r}-n1", block=f"b{b}", rack=f"r{r}") for b in range(1, blocks + 1)
                for r in range(1, racks + 1)]
        return [parse_node(o, Where(o["metadata"]["name"])) for o in objs]

    def test_kueue_order_compares_names_as_strings(self):
        from scheduler.tree import TopologyTree

        tree = TopologyTree((BLOCK, RACK, HOSTNAME), self.nodes())
        assert tree.levels[0].ids[:4] == ["b1", "b10", "b11", "b2"]

    def test_natural_order_compares_numbers_as_numbers_and_keeps_children_together(self):
        from scheduler.tree import TopologyTree, natural_path_order

        tree = TopologyTree((BLOCK, RACK, HOSTNAME), self.nodes(), path_order=natural_path_order)
        assert tree.levels[0].ids == [f"b{b}" for b in range(1, 12)]
        # every block's racks follow it, so a block's subtree is still one contiguous range
        assert tree.levels[1].ids[:4] == ["b1,r1", "b1,r2", "b2,r1", "b2,r2"]
        starts = tree.levels[0].child_start.tolist()
        assert starts == list(range(0, 23, 2))
        assert tree.leaf_for_values(("b10", "r2", "b10-r2-n1")) is not None

    def test_natural_order_reads_only_decimal_digits_as_numbers(self):
        from scheduler.tree import natural_path_order

        # a superscript is a digit to str.isdigit() but not to int(): it sorts as text
        assert natural_path_order(("x1\u00b2",)) == (((1, 0, "x"), (0, 1, ""), (1, 0, "\u00b2")),)
