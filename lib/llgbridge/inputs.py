"""An input, parsed and checked once where it enters, then passed as one value.

An input is what an analysis runs on: a name (its results' file name), and what that name loads:
a fixture (data/vocabs/ggml-vocab-NAME.gguf), a registered real model (`catalogue.REAL_MODELS`,
with the key overrides it is registered with), a GGUF file given instead (a what-if), or model
files run as they are (`make matrix MODELS=...`), each with llama.cpp's key overrides given on top.

It enters in four places: the command line (`llgbridge.run`, `make matrix`), the registry's input
sets (`make report`), a what-if, and a notebook's `input` parameter. Each makes an `Input` with
`Input.make` (the name checked, every override parsed as llama.cpp reads it and, where the file
is there, checked against its header) and passes it on; a notebook gets it as one JSON value
(`Input.param`), which `Input.from_param` reads back, checking its shape, not the file again.

Standard library only: the runner checks an input before any kernel starts.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalogue import is_real, overrides_of
from .errors import InputError
from .overrides import Override, check_file, parse_all
from .paths import name_problem, resolve, vocab_path

# the keys of `Input.param`, the notebooks' `input` parameter as the runner passes it
FIELDS = ("name", "file", "models", "overrides")


@dataclass(frozen=True)
class Input:
    name: str
    file: str = ""  # a GGUF file whose tokenizer is the input, instead of the name's own
    models: tuple[str, ...] = ()  # model files run as they are (the matrix, the server)
    overrides: tuple[Override, ...] = ()  # given on top of a registered input's own

    @classmethod
    def make(cls, name: str, file: str = "", models: tuple[str, ...] | list[str] = (), overrides: Any = ()) -> Input:
        """The input, checked: its name, each override (as llama.cpp reads it) and, for the files
        that are there, the overrides against their headers; InputError in one line naming the
        first refused. A missing file is refused where it is opened, naming it."""
        it = cls._shaped("input", name, file, models, overrides)
        if it.overrides:
            for f in it.files():
                if f.is_file():
                    check_file(it.overrides, f)
        return it

    @classmethod
    def from_param(cls, value: object) -> Input:
        """A notebook's `input` parameter: an input's name (by hand), or the JSON `param` made
        (from the runner), its shape and overrides checked; its file is not read again."""
        what = "parameter input"
        if isinstance(value, str):
            return cls._shaped(what, value)
        if not isinstance(value, dict) or set(value) - set(FIELDS) or "name" not in value:
            raise InputError(what, f"expected an input's name or {{{', '.join(FIELDS)}}}, got {value!r:.120}")
        models = value.get("models") or []
        if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
            raise InputError(what, f"models: expected a list of file names, got {models!r:.80}")
        file = value.get("file") or ""
        if not isinstance(file, str):
            raise InputError(what, f"file: expected a file name, got {file!r:.80}")
        return cls._shaped(what, value["name"], file, models, value.get("overrides") or [])

    @classmethod
    def _shaped(cls, what: str, name: object, file: str = "", models: Any = (), overrides: Any = ()) -> Input:
        why = name_problem(name)
        if why:
            raise InputError(what, why)
        assert isinstance(name, str)
        if not isinstance(overrides, (list, tuple)):
            raise InputError(what, f"overrides: expected a list of KEY=TYPE:VALUE, got {overrides!r:.80}")
        try:
            return cls(name, file, tuple(models), parse_all(overrides))
        except InputError as e:  # the override named, under the parameter that carried it
            raise InputError(what, str(e)) from None

    def param(self) -> dict[str, Any]:
        """The notebooks' `input` parameter: JSON, each override spelled one way."""
        return {"name": self.name, "file": self.file, "models": list(self.models), "overrides": self.given()}

    def renamed(self, name: str) -> Input:
        return dataclasses.replace(self, name=name)

    @property
    def registered(self) -> bool:
        """Whether the name alone says what is loaded (a fixture or a registered real model)."""
        return not self.file and not self.models

    @property
    def real(self) -> bool:
        """A registered real model (not a file given instead)."""
        return self.registered and is_real(self.name)

    @property
    def path(self) -> Path:
        """The file whose tokenizer is the input (the first model's, for model files)."""
        return resolve(self.models[0]) if self.models else vocab_path(self.name, self.file)

    def files(self) -> list[Path]:
        """The files a run on this input reads: its models, else its file, else its name's."""
        return [resolve(m) for m in self.models] if self.models else [vocab_path(self.name, self.file)]

    def given(self) -> list[str]:
        return [o.text for o in self.overrides]

    def load_overrides(self) -> tuple[Override, ...]:
        """Every override its loads take: a registered input's own, then the given ones (llama.cpp
        keeps them in a map: ordered by key, the same key twice refused)."""
        own = overrides_of(self.name) if self.registered else ()
        return parse_all([*own, *self.overrides])

    def load_texts(self) -> list[str]:
        """`load_overrides` as a result records them."""
        return [o.text for o in self.load_overrides()]

    def settings(self) -> dict[str, Any]:
        """What this input changes that the main report does not take for its name: a file other
        than the name's own, given overrides (but on model files, whose name `make matrix` makes
        from them), and model files run under a name that is not a model file's (`model-NAME`):
        each would stand in for that input."""
        out: dict[str, Any] = {}
        model_input = self.name.startswith("model-")
        # a file given in place of the name's own: a run of gpt-2's file named llama-spm was
        # published as llama-spm (issue 58, 1); the name's own file given again changes nothing
        if self.file and not self.models and resolve(self.file).resolve() != vocab_path(self.name).resolve():
            out["file"] = self.file
        if self.overrides and not model_input:
            out["overrides"] = self.given()
        if self.models and not model_input:
            out["models"] = list(self.models)
        return out
