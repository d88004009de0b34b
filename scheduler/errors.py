"""Errors that carry the place of bad input: which file, which object, which field."""

from __future__ import annotations


def one_line(text: str) -> str:
    """`text` with line breaks and other control characters escaped, so that a message
    quoting names and values from the input stays one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class InputError(Exception):
    """Bad input. The message is one line naming the file, the object and the field."""

    def __init__(self, reason: str, *, field: str = "", obj: str = "", file: str = "") -> None:
        self.reason = reason
        self.field = field
        self.obj = obj
        self.file = file
        super().__init__(self.render())

    def render(self) -> str:
        where = [part for part in (self.file, self.obj, self.field) if part]
        return one_line(": ".join([*where, self.reason]))

    def located(self, *, file: str = "", obj: str = "") -> InputError:
        """The same error with a file and/or object filled in where it had none."""
        return InputError(self.reason, field=self.field, obj=self.obj or obj, file=self.file or file)

    def under(self, prefix: str) -> InputError:
        """The same error with its field path nested under `prefix` (e.g. `spec.podSets[0]`)."""
        field = f"{prefix}.{self.field}" if self.field and prefix else (prefix or self.field)
        return InputError(self.reason, field=field, obj=self.obj, file=self.file)


class FlagError(Exception):
    """A bad command-line flag (exit status 2)."""
