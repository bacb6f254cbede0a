"""REDIS_URL's forms (bot/store/target.py) and REDIS_CA_FILE: a bad one is one line saying what
to type, at start, and never echoes a password."""

from __future__ import annotations

import pytest

from bot.config import ConfigError, load_settings
from bot.store import BadRedisUrl, parse


def test_the_forms_parse_into_what_they_name():
    t = parse("redis+sentinel://u:p%40ss@s1:26379,s2,[::1]:26380/mymaster/2?wait=2&failover_s=20")
    assert (t.kind, t.master, t.db, t.username, t.password) == ("sentinel", "mymaster", 2, "u", "p@ss")
    assert t.nodes == (("s1", 26379), ("s2", 26379), ("::1", 26380))
    assert (t.wait_replicas, t.failover_s, t.tls) == (2, 20.0, False)
    assert "p@ss" not in str(t)
    c = parse("rediss+cluster://n1:7000,n2:7001")
    assert (c.kind, c.nodes, c.tls, c.wait_replicas) == ("cluster", (("n1", 7000), ("n2", 7001)), True, 0)
    one = parse("redis://:pw@h:6379/1")
    assert (one.kind, one.failover_s) == ("single", 0.0) and "pw" not in str(one)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("redis+sentinel://s1:26379", "names its master"),
        ("redis+sentinel://s1/m/x", "db a number"),
        ("redis+cluster://n1:7000/0", "a Cluster has no db"),
        ("redis+cluster://n1:notaport", "is not host:port"),
        ("redis+sentinel://s1/m?wait=lots", "?wait=lots is not a number"),
        ("redis+sentinel://s1/m?colour=red", "unknown option ?colour="),
        ("memcached://h:11211", "unknown scheme memcached://"),
    ],
)
def test_a_bad_url_says_what_to_type(url, says):
    with pytest.raises(BadRedisUrl) as e:
        parse(url)
    assert says in str(e.value)


def test_a_ca_file_needs_a_tls_url_and_a_file(tmp_path):
    with pytest.raises(ConfigError, match="REDIS_URL is not TLS"):
        load_settings(redis_url="redis://h:6379/0", redis_ca_file=tmp_path / "ca.pem")
    with pytest.raises(ConfigError, match="is not a readable file"):
        load_settings(redis_url="rediss://h:6380/0", redis_ca_file=tmp_path / "missing.pem")
    (tmp_path / "ca.pem").write_text("-----BEGIN CERTIFICATE-----\n")
    assert load_settings(redis_url="rediss+sentinel://s1/m", redis_ca_file=tmp_path / "ca.pem").redis_ca_file
