"""The test servers run, hold the small warehouse, and need the password they were given."""

from __future__ import annotations

import psycopg
import pymysql
import pytest


def test_postgres_holds_the_small_warehouse_behind_a_password(postgres):
    with psycopg.connect(postgres.url) as connection:
        assert connection.execute("SELECT count(*) FROM orders").fetchone() == (5,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(postgres.url.replace(postgres.password, "wrong-password")).close()


def test_mariadb_holds_the_small_warehouse_behind_a_password(mariadb):
    kwargs = dict(host=mariadb.host, port=mariadb.port, user=mariadb.user, database="shop")
    connection = pymysql.connect(password=mariadb.password, **kwargs)
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM orders")
        assert cursor.fetchone() == (5,)
    connection.close()
    with pytest.raises(pymysql.err.OperationalError, match="Access denied"):
        pymysql.connect(password="wrong-password", **kwargs)
