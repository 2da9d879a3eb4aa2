"""What a command prints: lines, tables and rules, with Rich on a terminal and plain text piped.

On a terminal a ``Screen`` draws with Rich (colour, boxed tables that fit the width); piped, it
writes plain text and never imports Rich: a table's columns are padded to their widest cell,
so no cell (a path, a name) is ever broken across lines, and styles are dropped. Text is always
printed as written, never read as markup, with what the stream cannot encode escaped.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TextIO

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text
    from rich.tree import Tree

__all__ = ["Cell", "Node", "Screen", "Styled", "Table", "rich_tree"]

#: Between two columns of a plain table.
_GAP = "  "


@dataclass(frozen=True)
class Styled:
    """Text with a Rich style (``"dim"``, ``"bold red"``) that a terminal shows."""

    text: str
    style: str


Cell = str | Styled


def _plain(cell: Cell) -> str:
    return cell.text if isinstance(cell, Styled) else cell


@dataclass
class Table:
    """Columns with a header and rows of cells; a cell may hold several lines. Columns named in
    ``right`` are right-aligned (numbers), those in ``whole`` never wrapped on a terminal (ids);
    ``caption`` is printed below the table."""

    columns: tuple[str, ...]
    title: str = ""
    show_header: bool = True
    caption: str = ""
    right: tuple[str, ...] = ()
    whole: tuple[str, ...] = ()
    rows: list[tuple[Cell, ...]] = field(default_factory=list)

    def add_row(self, *cells: Cell) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"a row of {len(self.columns)} cells, not {len(cells)}")
        self.rows.append(cells)

    def plain_lines(self) -> list[str]:
        """The table as plain text: padded columns, no box, nothing wrapped."""
        grid = [tuple(_plain(c).split("\n") for c in row) for row in self.rows]
        if self.show_header:
            grid.insert(0, tuple([c] for c in self.columns))
        widths = [
            max((len(line) for row in grid for line in row[i]), default=0)
            for i in range(len(self.columns))
        ]
        lines = [self.title] if self.title else []
        for row in grid:
            for k in range(max(len(cell) for cell in row)):
                parts = [
                    self._align(column, cell[k] if k < len(cell) else "", width)
                    for column, cell, width in zip(self.columns, row, widths, strict=True)
                ]
                lines.append(_GAP.join(parts).rstrip())
        return [*lines, self.caption] if self.caption else lines

    def _align(self, column: str, text: str, width: int) -> str:
        return text.rjust(width) if column in self.right else text.ljust(width)


@dataclass
class Node:
    """A tree: a label of parts (a part may start a new line) and the nodes below it."""

    label: tuple[Cell, ...]
    children: list[Node] = field(default_factory=list)

    def add(self, *label: Cell) -> Node:
        child = Node(label)
        self.children.append(child)
        return child

    def plain_lines(self, level: int = 0) -> list[str]:
        """Each node's label indented two spaces below its parent's."""
        text = "".join(_plain(part) for part in self.label)
        lines = ["  " * level + part for part in text.split("\n")]
        for child in self.children:
            lines.extend(child.plain_lines(level + 1))
        return lines


def _rich_text(cells: tuple[Cell, ...], safe: Callable[[str], str]) -> Text:
    from rich.text import Text

    text = Text()
    for cell in cells:
        if isinstance(cell, Styled):
            text.append(safe(cell.text), style=cell.style)
        else:
            text.append(safe(cell))
    return text


def rich_tree(node: Node, safe: Callable[[str], str] = str) -> Tree:
    """``node`` as a Rich tree (for a terminal, a live display)."""
    from rich.tree import Tree

    def grow(into: Tree, below: Node) -> None:
        for child in below.children:
            grow(into.add(_rich_text(child.label, safe)), child)

    drawn = Tree(_rich_text(node.label, safe))
    grow(drawn, node)
    return drawn


class Screen:
    """Where a command prints: stdout (or stderr with ``err``), drawn for what it is."""

    def __init__(self, *, err: bool = False) -> None:
        self.stream: TextIO = sys.stderr if err else sys.stdout
        self.is_terminal = self.stream.isatty()
        self._console: Console | None = None

    def _safe(self, text: str) -> str:
        encoding = getattr(self.stream, "encoding", None) or "utf-8"
        try:
            return text.encode(encoding, "backslashreplace").decode(encoding)
        except LookupError:
            return text.encode("ascii", "backslashreplace").decode("ascii")

    def _rich(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.stream, soft_wrap=True, highlight=False)
        return self._console

    def _text(self, cell: Cell) -> Text:
        from rich.text import Text

        if isinstance(cell, Styled):
            return Text(self._safe(cell.text), style=cell.style)
        return Text(self._safe(cell))

    def line(self, text: str = "", style: str = "") -> None:
        """One line (or several) as written; ``style`` only on a terminal."""
        if self.is_terminal and style:
            self._rich().print(self._text(Styled(text, style)))
            return
        self.stream.write(self._safe(text) + "\n")
        self.stream.flush()

    def tree(self, node: Node) -> None:
        """``node`` and what is below it: Rich's guides on a terminal, indented lines piped."""
        if self.is_terminal:
            self._rich().print(rich_tree(node, self._safe))
            return
        for line in node.plain_lines():
            self.line(line)

    def rule(self, title: str) -> None:
        """A heading between sections."""
        if self.is_terminal:
            self._rich().rule(self._text(title))
            return
        self.line(f"-- {title} --")

    def table(self, table: Table) -> None:
        """``table``: boxed and fitted on a terminal, padded plain text piped."""
        if not self.is_terminal:
            for line in table.plain_lines():
                self.line(line)
            return
        from rich.table import Table as RichTable

        drawn = RichTable(
            title=self._text(table.title) if table.title else None,
            title_justify="left",
            caption=self._text(table.caption) if table.caption else None,
            caption_justify="left",
            show_header=table.show_header,
        )
        for column in table.columns:
            justify: Literal["left", "right"] = "right" if column in table.right else "left"
            drawn.add_column(
                self._text(column), overflow="fold", justify=justify, no_wrap=column in table.whole
            )
        for row in table.rows:
            drawn.add_row(*(self._text(c) for c in row))
        self._rich().print(drawn)
