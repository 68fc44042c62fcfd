"""GET parameters of the JSON endpoints and pages, read through Django forms.

A ``QueryForm`` is bound to a request's GET (a QueryDict, or a plain dict); ``parse``
returns its cleaned values or raises its ``query_error`` (a ValueError) whose message names
the bad parameter and what was sent: the text of the endpoint's 400. A blank or missing
parameter is its field's default, since the pages' links leave unset ones out.

It imports nothing of the app, so the results layer (runs.results.points_table) and the
pages' forms (runs.forms) both build on it.
"""

from django import forms

from sweepcore.spec import MAX_NAME_CHARS, text_problem

MAX_ID = 2**63 - 1  # the databases' bigint: a larger id matches nothing and overflows the query


class QueryError(ValueError):
    """A GET parameter that cannot be answered; the message says which, and why."""


class QueryParam(forms.Field):
    """One GET parameter; ``name`` is set by its form, so that messages can name it."""

    def __init__(self, default=None):
        super().__init__(required=False)
        self.default = default
        self.name = ""


class TextParam(QueryParam):
    """Text, as sent (or stripped with ``strip``); blank is the default. A NUL character
    (which no stored text holds, and a PostgreSQL query cannot carry) or more than ``most``
    characters (a name's, by default: every text parameter names or looks up something)
    is refused, naming the parameter and the limit."""

    def __init__(self, default="", strip=False, most=MAX_NAME_CHARS):
        super().__init__(default)
        self.strip, self.most = strip, most

    def to_python(self, value):
        text = "" if value is None else str(value)
        text = text.strip() if self.strip else text
        problem = text_problem(text, self.most)
        if problem:
            raise forms.ValidationError(f"{self.name}: {problem}")
        return text or self.default


class ChoiceParam(TextParam):
    """Stripped text that must be one of ``choices``; blank is the default."""

    def __init__(self, choices, what, default=""):
        super().__init__(default, strip=True)
        self.choices, self.what = tuple(choices), what

    def validate(self, value):
        if value and value not in self.choices:
            raise forms.ValidationError(
                f"unknown {self.what} {value!r}: choose one of {', '.join(self.choices)}")


class IntegerParam(QueryParam):
    """An integer within ``minimum``..``maximum``; blank is the default."""

    def __init__(self, default=None, minimum=1, maximum=None):
        super().__init__(default)
        self.minimum, self.maximum = minimum, maximum

    def to_python(self, value):
        raw = "" if value is None else str(value).strip()
        if raw == "":
            return self.default
        try:
            number = int(raw)
        except ValueError:
            raise forms.ValidationError(f"{self.name} must be an integer, got {raw!r}") from None
        if number < self.minimum or (self.maximum is not None and number > self.maximum):
            upper = f" and at most {self.maximum}" if self.maximum is not None else ""
            raise forms.ValidationError(f"{self.name} must be at least {self.minimum}{upper}, got {number}")
        return number


class NumberParam(QueryParam):
    """A number strictly between ``above`` and ``below``; blank is the default."""

    def __init__(self, default, above, below):
        super().__init__(default)
        self.above, self.below = above, below

    def to_python(self, value):
        raw = "" if value is None else str(value)
        if raw == "":
            return self.default
        try:
            number = float(raw)
        except ValueError:
            raise forms.ValidationError(f"{self.name} must be a number, got {raw!r}") from None
        if not self.above < number < self.below:  # nan is neither, so it is refused too
            raise forms.ValidationError(f"{self.name} must be > {self.above:g} and < {self.below:g}, got {raw}")
        return number


class FlagParam(QueryParam):
    """A checkbox-like switch: on for 1, true, on or yes; off for anything else."""

    ON = ("1", "true", "on", "yes")

    def __init__(self):
        super().__init__(False)

    def to_python(self, value):
        return value in self.ON


class IdListParam(QueryParam):
    """Ids, the parameter given once per id (?run=1&run=2), or, with ``commas``, also as a
    comma-separated list (?runs=1,2,3, blank parts ignored): a list in the order given, each
    id once. ``not_an_id`` is the message for anything else (a number beyond MAX_ID too),
    with {} for the bad part."""

    widget = forms.MultipleHiddenInput  # reads every value of the parameter (getlist)

    def __init__(self, not_an_id, commas=False):
        super().__init__([])
        self.not_an_id, self.commas = not_an_id, commas

    def to_python(self, values):
        ids = []
        for value in values or ():
            for part in value.split(",") if self.commas else [value]:
                part = part.strip()
                if self.commas and not part:
                    continue
                # isdecimal, not isdigit: int() refuses digits such as "²" that isdigit accepts.
                if not part.isdecimal() or int(part) > MAX_ID:
                    raise forms.ValidationError(self.not_an_id.format(part))
                if int(part) not in ids:
                    ids.append(int(part))
        return ids


class ChoiceListParam(QueryParam):
    """Several of ``choices``, the parameter given once each (?cols=a&cols=b) or as a
    comma-separated list: a list in the order given, each once. A parameter sent blank
    (a form's hidden empty value beside checkboxes none of which is ticked) is an empty
    list; one not sent at all is ``default``."""

    widget = forms.MultipleHiddenInput  # reads every value of the parameter (getlist)

    def __init__(self, choices, what, default=()):
        super().__init__(list(default))
        self.choices, self.what = tuple(choices), what

    def to_python(self, values):
        if not values:
            return list(self.default)
        if isinstance(values, str):  # a plain dict's single value
            values = [values]
        chosen = []
        for value in values:
            for part in str(value).split(","):
                part = part.strip()
                if not part:
                    continue
                if part not in self.choices:
                    raise forms.ValidationError(
                        f"unknown {self.what} {part!r}: choose among {', '.join(self.choices)}")
                if part not in chosen:
                    chosen.append(part)
        return chosen


class QueryForm(forms.Form):
    """A form over GET parameters whose errors are one message naming the parameter."""

    query_error = QueryError

    def __init__(self, query):
        super().__init__(query)
        for name, field in self.fields.items():
            field.name = name

    def first_error(self):
        """The message of the first bad parameter, in the order the form declares them."""
        return next(iter(self.errors.values()))[0]

    @classmethod
    def parse(cls, query):
        """The cleaned parameters of ``query``; raises ``query_error`` at the first bad one."""
        form = cls(query)
        if not form.is_valid():
            raise cls.query_error(form.first_error())
        return form.cleaned_data
