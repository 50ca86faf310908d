"""The parameter tree: the core's module hierarchy as a Textual `Tree`, updated in place.

Each tree node's data is a stable key: the HF name without the `bert.` prefix, so that expanded nodes and the
cursor survive edits, and even a change of head class. Labels are not stored: `render_label` reads the
current count, shape and kind from the core's tree on every paint, so an edit that keeps the structure costs
one refresh instead of one `set_label` per node. Structure changes (layers added or removed, the pooler, the
head) are reconciled child list by child list, and encoder layers are filled in only when first expanded.

Modules that only hold parameters (a Linear, an Embedding, a LayerNorm) are folded into their parent, as
`query.weight`, `query.bias`, so every leaf is one named tensor.

The tree reads like a table: name, count, the change against a pinned baseline, share and shape each stand
in a column that lines up across every level shown (`Columns`, measured over the visible lines). Where the
pane is too narrow, the share gives way first, then the shape, then the change; the count never does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ...core import Module, Node, Param, ParamTree
from ...core.count.diff import delta_against
from ...core.count.tree import LayerStack, body_names, strip_body

_LAYER_0 = re.compile(r"(\b(?:layer|layers|albert_layer_groups|albert_layers))\.\d+(?=\.|$)")  # stacked layers
KIND_MARKS = {"weight": "■", "bias": "•", "embedding": "▦", "norm": "≈"}
TIED_MARK = "⇄"


def key_of(name: str) -> str:
    """The stable key of a module or parameter: its HF name without the `bert.` / `roberta.` prefix."""
    return strip_body(name)


INDENT = 2  # columns each level of the tree adds (its guide), and the icon or kind mark before a name
GAP = 2  # between columns


@dataclass(frozen=True, slots=True)
class Columns:
    """Where each column starts, for the lines shown: names end at `name`, then the count (right-aligned in
    `count` characters), the share and the shape, each shown only where the pane has room for it."""

    name: int
    count: int
    share: bool
    shape: int  # 0: not shown
    delta: int = 0  # the change against a pinned baseline; 0: none pinned, or not shown


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the displayed tree: its key, what it shows, and whether it can open."""

    key: str
    label: str
    is_module: bool


def display_children(module: Module) -> list[Row]:
    """The rows under a module: sub-modules, and the parameters of modules that hold nothing else.

    The encoder's rows are named without building its layers (they are built when opened)."""
    if isinstance(module.children, LayerStack):
        stack = module.children
        return [Row(key_of(stack.item_name(i)), stack.item_title(i), True) for i in range(len(stack))]
    rows: list[Row] = []
    for child in module.children:
        if isinstance(child, Param):
            rows.append(Row(key_of(child.name), _relative(child.name, module.name), False))
        elif all(isinstance(grandchild, Param) for grandchild in child.children):
            rows.extend(Row(key_of(p.name), _relative(p.name, module.name), False) for p in child.children)
        else:
            rows.append(Row(key_of(child.name), child.title, True))
    return rows


def _shape_of(model: ParamTree) -> tuple[int, str, bool, str]:
    """What decides the tree's structure: other edits only change numbers in labels."""
    return model.config.num_hidden_layers, model.config.head, model.config.has_pooler, model.config.model_type


def _relative(name: str, parent: str) -> str:
    return name.removeprefix(f"{parent}.") if parent else name


EXPAND_ALL_LAYERS = 48  # layers of a stack `e` opens (deeper stacks: the rest open one by one)


class ParamTreeView(Tree[str]):
    """Every weight and bias of the current model, with subtotals; `show(tree)` updates it in place.

    | Key | Action |
    | :- | :- |
    | e | Expand every loaded node (encoder layers load as they open). |
    | c | Collapse every node. |
    | z | Zoom: the tree fills the screen, with room for every column; z again restores it. |
    """

    BINDINGS = [
        Binding("e", "expand_all", "Expand all"),
        Binding("c", "collapse_all", "Collapse all"),
        Binding("z", "zoom", "Zoom"),
    ]
    COMPONENT_CLASSES = {
        "param-tree--count", "param-tree--shape", "param-tree--weight", "param-tree--bias",
        "param-tree--embedding", "param-tree--norm", "param-tree--tied", "param-tree--module",
    }
    DEFAULT_CSS = """
    ParamTreeView > .param-tree--count { color: $text; text-style: bold; }
    ParamTreeView > .param-tree--shape { color: $text-muted; }
    ParamTreeView > .param-tree--module { text-style: bold; }
    ParamTreeView > .param-tree--weight { color: $accent; }
    ParamTreeView > .param-tree--bias { color: $warning; }
    ParamTreeView > .param-tree--embedding { color: $success; }
    ParamTreeView > .param-tree--norm { color: $secondary; }
    ParamTreeView > .param-tree--tied { color: $text-muted; text-style: italic; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("model", data="", id=id)
        self.guide_depth = 2
        self._by_key: dict[str, Node | None] = {}  # lookups in the current model, filled as lines are painted
        self._counted: ParamTree | None = None
        self._total = 0
        self._columns: Columns | None = None  # measured over the visible lines; None: measure again
        self._layout: tuple[int, list[str]] | None = None  # visible lines: widest name end, distinct keys measured
        self._baseline: ParamTree | None = None
        self._marks: dict[str, str] = {}

    @property
    def model(self) -> ParamTree | None:
        return self._counted

    def node_for(self, key: str) -> Node | None:
        """The core node shown under `key` in the current model (found once, then remembered)."""
        if key not in self._by_key:
            model = self._counted
            found = None if model is None else model.find(key)
            if found is None and model is not None:
                found = model.find(f"{model.config.body}.{key}")
            self._by_key[key] = found
        return self._by_key[key]

    def show(self, model: ParamTree) -> None:
        """Show `model`: repaint the labels; add or remove only the nodes whose structure changed."""
        previous, self._counted = self._counted, model
        self._total = model.total
        self._by_key = {}
        self._columns = None
        if str(self.root.label) != model.root.title:
            self.root.set_label(model.root.title)
        if not self.root.is_expanded:
            self.root.expand()
        if previous is None or _shape_of(previous) != _shape_of(model):
            self._reconcile(self.root, model.root)
            self._layout = None
        self.root.refresh()  # every line's path holds the root: its cached strips are painted again
        self.refresh()

    def set_baseline(self, baseline: ParamTree | None) -> None:
        """Show each node's change against `baseline` (None: no deltas)."""
        self._baseline = baseline
        self._columns = None
        self.root.refresh()
        self.refresh()

    def mark_for(self, key: str) -> str | None:
        """The note shown beside the tensor at `key` (`set_marks`), if any: the detail strip says it too, where
        the tree's line is too narrow to."""
        return self._marks.get(key)

    def set_marks(self, marks: dict[str, str]) -> None:
        """Notes to show beside some tensors (a checkpoint that stores them differently), by key."""
        self._marks = marks

    def _delta(self, key: str, item: Node) -> str:
        """`Δ +1,234` against the pinned baseline's counterpart of the node (`diff.counterpart`: a head class's
        `bert.encoder` is BertModel's `encoder`), `Δ new` where the baseline has none ("" when none is pinned)."""
        if self._baseline is None or self._counted is None:
            return ""
        delta = delta_against(self._counted, item.name, self._baseline)
        if delta is None:
            return "Δ new"
        return f"Δ {delta:+,}" if delta else "Δ 0"

    def _reconcile(self, tree_node: TreeNode[str], module: Module) -> None:
        """Make `tree_node`'s children match `module`'s rows, keeping every node whose key stays."""
        rows = display_children(module)
        current = list(tree_node.children)
        keys = [row.key for row in rows]
        current_keys = [child.data for child in current]
        if current_keys != keys[: len(current_keys)]:
            if keys == current_keys[: len(keys)]:  # rows removed from the end (fewer layers, no pooler)
                for child in current[len(keys):]:
                    child.remove()
                current = current[: len(keys)]
            else:  # a different layout (another head class): rebuild, restoring what was open
                expanded = self._expanded_keys(tree_node) | body_names()  # the head classes' body opens itself
                tree_node.remove_children()
                current = []
                self._add_rows(tree_node, rows, expanded)
                return
        self._add_rows(tree_node, rows[len(current):], set())
        for child, row in zip(current, rows):
            if row.is_module and (child.is_expanded or child.children):
                child_module = self.node_for(row.key)
                if isinstance(child_module, Module):
                    self._reconcile(child, child_module)

    def _add_rows(self, tree_node: TreeNode[str], rows: Iterable[Row], expanded: set[str]) -> None:
        for row in rows:
            if not row.is_module:
                tree_node.add_leaf(row.label, data=row.key)
                continue
            child = tree_node.add(row.label, data=row.key, expand=False, allow_expand=True)
            if row.key in expanded:
                self._fill(child)
                child.expand()
                self._add_rows_expanded(child, expanded)

    def _add_rows_expanded(self, child: TreeNode[str], expanded: set[str]) -> None:
        """Re-open, below a rebuilt node, the nodes that were open before."""
        for grandchild in child.children:
            if grandchild.data in expanded:
                self._fill(grandchild)
                grandchild.expand()
                self._add_rows_expanded(grandchild, expanded)

    def _fill(self, tree_node: TreeNode[str]) -> None:
        """Add a module's rows the first time it is opened (layers are built lazily)."""
        module = self.node_for(tree_node.data or "")
        if isinstance(module, Module) and not tree_node.children:
            self._add_rows(tree_node, display_children(module), set())

    @staticmethod
    def _expanded_keys(tree_node: TreeNode[str]) -> set[str]:
        found: set[str] = set()
        stack = list(tree_node.children)
        while stack:
            node = stack.pop()
            if node.is_expanded and node.data is not None:
                found.add(node.data)
                stack.extend(node.children)
        return found

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[str]) -> None:
        self._columns = self._layout = None
        self._fill(event.node)
        module = self.node_for(event.node.data or "")
        if isinstance(module, Module):  # it may have been loaded under another config: bring it up to date
            self._reconcile(event.node, module)

    def on_tree_node_collapsed(self) -> None:
        self._columns = self._layout = None

    def on_resize(self) -> None:
        self._columns = None

    def action_expand_all(self) -> None:
        """Open every module, and of a stack of layers the first `EXPAND_ALL_LAYERS` (the layers are alike; the
        others open one by one). Nodes open quietly: a `NodeExpanded` per node, each handled on its own, grows
        with the layers until deep models freeze the explorer."""
        with self.prevent(Tree.NodeExpanded):
            skipped = self._open_all(self.root)
        self._columns = self._layout = None
        if skipped:
            self.notify(f"opened every module and the first {EXPAND_ALL_LAYERS} layers; {skipped:,} more, alike, "
                        "open one by one (Enter)", timeout=6)

    def action_zoom(self) -> None:
        """The tree alone on the screen (Textual's maximize), or back in its pane: beside the form and the totals
        at 120 columns its share, shape and change give way; zoomed, they have room."""
        if self.screen.maximized is self:
            self.screen.minimize()
        else:
            self.screen.maximize(self, container=False)
        self._columns = None

    def action_collapse_all(self) -> None:
        self.root.collapse_all()
        self.root.expand()
        self._columns = self._layout = None

    def _open_all(self, tree_node: TreeNode[str]) -> int:
        """Fill and open `tree_node` and what is below it; the number of layers left closed."""
        self._fill(tree_node)
        tree_node.expand()
        skipped = 0
        for child in tree_node.children:
            if not child.allow_expand:
                continue
            index = (child.data or "").rsplit(".", 1)[-1]
            if index.isdigit() and int(index) >= EXPAND_ALL_LAYERS:
                skipped += 1
                continue
            skipped += self._open_all(child)
        return skipped

    def render_label(self, node: TreeNode[str], base_style: Style, style: Style) -> Text:
        """`name  count  share  [shape]` in the table's columns, from the current model."""
        label = super().render_label(node, base_style, style)
        item = self.node_for(node.data or "")
        if item is None:
            return label
        columns = self.columns()
        over = self._name_end(node) - columns.name
        if over > 0:  # a name too long for the pane gives way (with …) before the count does
            label.truncate(max(1, label.cell_len - over), overflow="ellipsis")
        label.pad_right(max(0, -over))
        mark, count, share, shape, extra = self._label_parts(node, item, columns)
        muted = self.get_component_rich_style("param-tree--shape", partial=True)
        count_style = self.get_component_rich_style("param-tree--count", partial=True)
        if isinstance(item, Module):
            label.stylize(self.get_component_rich_style("param-tree--module", partial=True))
            return Text.assemble(label, (count, count_style), (share, muted), (shape + extra, muted))
        kind_style = self.get_component_rich_style(f"param-tree--{'tied' if item.tied_to else item.kind}", partial=True)
        return Text.assemble((mark, kind_style), label, (count, kind_style if item.tied_to else count_style),
                             (share, muted), (shape + extra, muted))

    def get_label_width(self, node: TreeNode[str]) -> int:
        """The label's width without styling it (the tree asks for every line when it rebuilds). Every
        encoder layer has layer 0's count and share, so a layer is measured by layer 0 (not built)."""
        item = self._measured(node)
        if item is None:
            return super().get_label_width(node)
        columns = self.columns()
        icon = INDENT if node.allow_expand else 0
        over = self._name_end(node) - columns.name
        name = max(1, len(str(node.label)) - over) if over > 0 else len(str(node.label)) - over
        return icon + name + sum(
            len(part) for part in self._label_parts(node, item, columns))

    def _measured(self, node: TreeNode[str]) -> Node | None:
        """The core node that measures `node`'s line: an encoder layer, and anything in it, is measured by
        layer 0 (every layer has its names, shapes and counts), so that 1,000 layer lines build one layer."""
        return self.node_for(_measure_key(node.data or ""))

    def _visible_layout(self) -> tuple[int, list[str]]:
        """Where the widest visible name ends, and the distinct keys that measure the visible lines (kept until
        a node opens or closes, or the structure changes: an edit of a size keeps them)."""
        if self._layout is None:
            name, keys = 0, dict[str, None]()
            for node in self._visible(self.root):
                name = max(name, self._name_end(node))
                if node.data is not None:
                    keys[_measure_key(node.data)] = None
            self._layout = (name, list(keys))
        return self._layout

    def columns(self) -> Columns:
        """The table's columns for the lines shown now, fitted to the pane (measured once per change)."""
        if self._columns is None:
            self._columns = self._measure()
        return self._columns

    def _measure(self) -> Columns:
        name, keys = self._visible_layout()
        shape = delta = 0
        for key in keys:
            item = self.node_for(key)
            if isinstance(item, Param):
                shape = max(shape, len(_shape_text(item)))
            if item is not None and self._baseline is not None:  # a layer the baseline lacks changes by all it has
                delta = max(delta, len(self._delta(key, item)), len(f"Δ {item.count:+,}"))
        count = max(len(f"{self._total:,}"), len("tied"))
        width = self.scrollable_content_region.width or 10**6  # not laid out yet: everything fits
        name = min(name, max(width - GAP - count, MIN_NAME))  # long names are cut (…) so the count stays in view
        used = name + GAP + count
        # What gives way, in order: the share, then the shape, then the change; never the count.
        for share, shown_shape, shown_delta in ((True, shape, delta), (False, shape, delta), (False, 0, delta)):
            extra = (GAP + shown_delta if shown_delta else 0) + (GAP + SHARE_WIDTH if share else 0) + (
                GAP + shown_shape if shown_shape else 0)
            if used + extra <= width:
                return Columns(name, count, share, shown_shape, shown_delta)
        return Columns(name, count, False, 0, 0)

    def _visible(self, node: TreeNode[str]) -> Iterable[TreeNode[str]]:
        """The lines shown: the root and every child of an expanded node, depth first (iteratively: a deep or
        long tree must not recurse)."""
        stack = [node]
        while stack:
            current = stack.pop()
            yield current
            if current.is_expanded:
                stack.extend(reversed(current.children))

    def _name_end(self, node: TreeNode[str]) -> int:
        """Where `node`'s name ends on its line: the guides of its depth, its icon or kind mark, its name."""
        depth = 0
        parent = node.parent
        while parent is not None:
            depth += 1
            parent = parent.parent
        return INDENT * depth + INDENT + len(str(node.label))

    def _label_parts(self, node: TreeNode[str], item: Node, columns: Columns) -> tuple[str, str, str, str, str]:
        """(kind mark, count and change, share, shape, notes) as plain text, each padded to its column."""
        count = f"{'tied':>{columns.count}}" if isinstance(item, Param) and item.tied_to else f"{item.count:>{columns.count},}"
        count = " " * GAP + count
        if columns.delta:
            count += " " * GAP + f"{self._delta(node.data or '', item):>{columns.delta}}"
        share = ""
        if columns.share:
            shown = self._total and node is not self.root
            share = " " * GAP + (f"{100 * item.count / self._total:>{SHARE_WIDTH - 1}.1f}%" if shown else " " * SHARE_WIDTH)
        shape = ""
        if columns.shape:
            shape = " " * GAP + f"{_shape_text(item) if isinstance(item, Param) else '':<{columns.shape}}"
        if isinstance(item, Module):
            return "", count, share, shape, ""
        mark = f"{TIED_MARK if item.tied_to else KIND_MARKS[item.kind]} "
        note = f"  {self._marks[node.data]}" if node.data in self._marks else ""
        return mark, count, share, shape, note


SHARE_WIDTH = 6  # " 90.2%"
MIN_NAME = 16  # the name column is never cut below this: a narrower pane scrolls sideways instead


def _measure_key(key: str) -> str:
    """`key` with its encoder layer index replaced by 0: layers are identical in names, shapes and counts."""
    return _LAYER_0.sub(r"\1.0", key)


def _shape_text(param: Param) -> str:
    return f"[{', '.join(str(n) for n in param.shape)}]"
