"""Which graph nodes carry a label: short statements, placed so they never overlap, more of them as the user zooms."""
from __future__ import annotations

import numpy as np

from core.memory.graph_view import (GraphEdge, GraphNode, GraphView, LABEL_CHARS, choose_labels, elide,
                                    label_budget, node_weights)


def _boxes_overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def test_a_long_statement_is_cut_at_a_word_with_an_ellipsis():
    short = elide("User's cello teacher is called Ana and she lives in Boulder")
    assert short == "User's cello teacher is…" and len(short) <= LABEL_CHARS
    assert elide("User plays the cello") == "User plays the cello"  # short enough: untouched
    assert elide("  User\nlikes   tea ") == "User likes tea"  # one line, single spaces
    assert elide("Supercalifragilisticexpialidocious-and-more") == "Supercalifragilisticexp…"  # no space: cut hard
    assert elide("") == ""


def test_entities_weigh_by_their_links_and_memories_by_importance():
    nodes = (GraphNode("m1", "a", "semantic", 0.7, 1), GraphNode("m2", "b", "semantic", 0.2, 2),
             GraphNode("e1", "Ana", "entity", 0.0))
    view = GraphView(nodes, (GraphEdge(0, 2, 0.3, "entity"), GraphEdge(1, 2, 0.3, "entity")))
    assert np.allclose(node_weights(view), [0.7, 0.2, 0.2])


def test_the_most_important_nodes_are_labelled_without_overlap():
    rng = np.random.default_rng(3)
    screen = rng.uniform(0, 800, (2000, 2))  # a crowded, zoomed-out picture of 2,000 nodes
    priority = rng.uniform(0, 1, 2000)
    sizes = np.tile([150.0, 16.0], (2000, 1))
    placed = choose_labels(screen, priority, sizes, viewport=(800, 800), limit=40)
    assert 10 <= len(placed) <= 40  # a few dozen words, not 2,000
    boxes = [p.box for p in placed]
    assert not any(_boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    chosen = [p.index for p in placed]
    assert np.mean(priority[chosen]) > 0.8  # the important ones win the space
    assert all(0 <= screen[i][0] <= 800 for i in chosen)


def test_the_selected_node_and_its_neighbours_come_first():
    screen = np.array([[100.0, 100.0], [104.0, 102.0], [100.0, 300.0], [400.0, 400.0]])
    priority = np.array([0.1, 0.9, 0.0, 0.5])
    sizes = np.tile([150.0, 16.0], (4, 1))
    placed = choose_labels(screen, priority, sizes, viewport=(800, 800), pinned=[0, 2], limit=10)
    chosen = [p.index for p in placed]
    assert chosen[:2] == [0, 2] and sorted(chosen[2:]) == [1, 3]  # then by importance, wherever there is room
    assert placed[0].box[0] >= 100  # right of its node
    boxes = [p.box for p in placed]
    assert not any(_boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_a_label_moves_to_the_left_or_below_before_it_is_dropped():
    screen = np.array([[100.0, 100.0], [180.0, 100.0]])  # the second sits where the first's label goes
    placed = choose_labels(screen, np.array([1.0, 0.5]), np.tile([120.0, 16.0], (2, 1)), viewport=(800, 800))
    assert [p.index for p in placed] == [0, 1]
    assert not _boxes_overlap(placed[0].box, placed[1].box)


def test_nodes_off_screen_are_not_labelled():
    screen = np.array([[-50.0, 10.0], [10.0, 900.0], [10.0, 10.0]])
    placed = choose_labels(screen, np.ones(3), np.tile([60.0, 16.0], (3, 1)), viewport=(800, 600), pinned=[0])
    assert [p.index for p in placed] == [2]


def test_zooming_in_labels_more_of_what_is_in_view():
    assert label_budget(1.0) < label_budget(4.0) < label_budget(64.0) == label_budget(1000.0)
    assert label_budget(0.2) == label_budget(1.0)
    rng = np.random.default_rng(5)
    points = rng.uniform(-1, 1, (2000, 2))
    priority = rng.uniform(0, 1, 2000)
    sizes = np.tile([150.0, 16.0], (2000, 1))

    def labelled_share(zoom: float) -> float:
        screen = (points * 400 * zoom) + 400  # the same graph, magnified about the centre
        in_view = np.all((screen >= 0) & (screen <= 800), axis=1).sum()
        return len(choose_labels(screen, priority, sizes, viewport=(800, 800), limit=label_budget(zoom))) / in_view
    assert labelled_share(1.0) < 0.05 < labelled_share(4.0) < labelled_share(16.0)


def _covers(box, centre, radius) -> bool:
    x, y, w, h = box
    dx = max(x - centre[0], 0.0, centre[0] - (x + w))
    dy = max(y - centre[1], 0.0, centre[1] - (y + h))
    return dx * dx + dy * dy < radius * radius


def test_a_label_keeps_off_its_own_node_and_off_its_neighbours_where_it_can():
    """The selected node's bold label sat over the node beside it (seen in the graph's screenshot): a label takes
    the first spot around its node that covers no other drawn node, and clears its own node's disc (big nodes
    are 30 px across, not 12)."""
    screen = np.array([[100.0, 100.0], [140.0, 100.0], [400.0, 400.0]])  # the neighbour sits where "right" goes
    radii = np.array([15.0, 10.0, 4.0])
    placed = choose_labels(screen, np.array([0.5, 0.1, 0.9]), np.tile([150.0, 16.0], (3, 1)), viewport=(800, 800),
                           pinned=[0], radius=radii)
    boxes = {p.index: p.box for p in placed}
    assert placed[0].index == 0
    for index, box in boxes.items():
        assert not any(_covers(box, screen[j], radii[j]) for j in range(3)), (index, box)


def test_where_every_spot_covers_a_node_the_label_is_still_shown():
    screen = np.array([[100.0, 100.0]] + [[100.0 + dx, 100.0 + dy] for dx, dy in
                                          ((60, 0), (-60, 0), (0, 20), (0, -20), (-20, 20), (20, -20))])
    placed = choose_labels(screen, np.linspace(1, 0, len(screen)), np.tile([150.0, 16.0], (len(screen), 1)),
                           viewport=(800, 800), pinned=[0], radius=6.0)
    assert placed and placed[0].index == 0 and placed[0].box[0] >= 100  # covered nodes or not, it is named
