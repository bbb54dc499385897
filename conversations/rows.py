"""Plain-SQL row reads and writes for the per-message hot path (a message POST, a run's
claim and close).

Django's ``objects.create()`` and ``QuerySet.update()`` build and compile the statement
anew each time: 0.55-0.8 ms of CPU per statement on this machine's PostgreSQL, against
0.25-0.4 ms for the same statement sent as text. A message POST wrote three rows that way,
a run's close two, and every request read its conversation that way. These read and
write the same rows: the fields and the database backend prepare and convert each value
(defaults, ``auto_now_add``, JSON and datetime adaptation); the read and insert
statements are built once per model. They send no model signals; nothing listens to these
models' saves (a test keeps it so).
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from django.db import connection
from django.db.models import Model

M = TypeVar("M", bound=Model)


def get(model: type[M], pk: Any, **equal: Any) -> M | None:
    """The row ``pk`` of ``model`` if its columns ``equal`` (attribute names, e.g.
    ``owner_id``) have these values; None otherwise. Every column is loaded."""
    fields, converters, sql = _select_statement(model, connection.vendor, tuple(equal))
    with connection.cursor() as cursor:
        cursor.execute(sql, [pk, *equal.values()])
        row = cursor.fetchone()
    if row is None:
        return None
    values = list(row)
    for index, (column, functions) in converters.items():
        for convert in functions:
            values[index] = convert(values[index], column, connection)
    return model.from_db(connection.alias, [field.attname for field in fields], values)


def loaded(model: type[M], **values: Any) -> M:
    """An instance of ``model`` with these columns (attribute names) loaded and the others
    deferred, as the ORM's ``only()`` builds it: for rows read by a plain query."""
    names = [field.attname for field in model._meta.concrete_fields if field.attname in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])


def insert(instance: M) -> M:
    """Save a new ``instance`` (one ``INSERT ... RETURNING`` its primary key)."""
    model = type(instance)
    fields, sql = _insert_statement(model, connection.vendor)
    values = [
        field.get_db_prep_save(field.pre_save(instance, True), connection) for field in fields
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, values)
        instance.pk = cursor.fetchone()[0]
    instance._state.adding = False
    instance._state.db = connection.alias
    return instance


def update(model: type[Model], pk: Any, **values: Any) -> int:
    """Set these columns (field names) of one row; the number of rows updated."""
    meta = model._meta
    quote = connection.ops.quote_name
    fields = [meta.get_field(name) for name in values]
    assignments = ", ".join(f"{quote(field.column)} = %s" for field in fields)
    params = [field.get_db_prep_save(_saved_value(values[field.name], field), connection)
              for field in fields]  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {quote(meta.db_table)} SET {assignments} WHERE {quote(meta.pk.column)} = %s",
            [*params, pk],
        )
        return cursor.rowcount


@functools.cache
def _select_statement(
    model: type[Model], vendor: str, equal: tuple[str, ...]
) -> tuple[list[Any], dict[int, tuple[Any, list[Any]]], str]:
    """The columns a read loads, the converters of those that need one (as the ORM's
    compiler finds them: the backend's, then the field's) and its SQL."""
    meta = model._meta
    quote = connection.ops.quote_name
    fields = list(meta.concrete_fields)
    converters = {}
    for index, field in enumerate(fields):
        column = field.get_col(meta.db_table)
        functions = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if functions:
            converters[index] = (column, functions)
    columns = ", ".join(quote(field.column) for field in fields)
    conditions = [f"{quote(meta.pk.column)} = %s"]
    by_attname = {field.attname: field for field in fields}
    conditions += [f"{quote(by_attname[name].column)} = %s" for name in equal]
    sql = f"SELECT {columns} FROM {quote(meta.db_table)} WHERE {' AND '.join(conditions)}"
    return fields, converters, sql


def _saved_value(value: Any, field: Any) -> Any:
    """A related instance becomes its key, as in ``QuerySet.update()``."""
    if hasattr(value, "prepare_database_save"):
        return value.prepare_database_save(field)
    return value


@functools.cache
def _insert_statement(model: type[Model], vendor: str) -> tuple[list[Any], str]:
    """The fields an insert writes (all but a generated primary key) and its SQL."""
    meta = model._meta
    quote = connection.ops.quote_name
    fields = [field for field in meta.concrete_fields if not field.generated and not (
        field.primary_key and field.db_returning
    )]  # fmt: skip
    columns = ", ".join(quote(field.column) for field in fields)
    placeholders = ", ".join(["%s"] * len(fields))
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({columns}) VALUES ({placeholders}) "
        f"RETURNING {quote(meta.pk.column)}"
    )
    return fields, sql
