"""Public network structures: counts from the BNLearn repository, acyclicity, pgmpy's own reader."""

from __future__ import annotations

import gzip

import networkx as nx
import numpy as np
import pytest

from heuresis.causal.networks import NETWORKS, load_network, network_path, parse_bif_structure

# nodes and arcs as listed on bnlearn.com/bnrepository (and in Scutari's bnlearn documentation)
KNOWN = {"asia": (8, 8), "cancer": (5, 4), "earthquake": (5, 4), "sachs": (11, 17), "child": (20, 25),
         "insurance": (27, 52), "alarm": (37, 46)}


def test_networks_are_the_seven_of_the_paper():
    assert set(NETWORKS) == set(KNOWN)


@pytest.mark.parametrize("name", NETWORKS)
def test_counts_and_acyclic(name):
    net = load_network(name)
    d, arcs = KNOWN[name]
    assert (net.d, net.n_arcs) == (d, arcs)
    assert net.adjacency.shape == (d, d) and net.adjacency.dtype == np.int8
    assert not np.diag(net.adjacency).any()
    assert nx.is_directed_acyclic_graph(nx.from_numpy_array(net.adjacency, create_using=nx.DiGraph))
    assert len(set(net.variables)) == d


def test_known_arcs_of_asia():
    arcs = set(load_network("asia").arcs())
    assert {("asia", "tub"), ("smoke", "lung"), ("smoke", "bronc"), ("tub", "either"), ("lung", "either"),
            ("either", "xray"), ("either", "dysp"), ("bronc", "dysp")} == arcs


@pytest.mark.parametrize("name", ["asia", "sachs", "alarm"])
def test_structure_equals_pgmpy_reader(name):
    from pgmpy.readwrite import BIFReader

    reader = BIFReader(string=gzip.open(network_path(name), "rt").read())
    net = load_network(name)
    assert reader.get_variables() == net.variables
    assert {tuple(e) for e in reader.get_edges()} == set(net.arcs())


def test_name_case_and_unknown():
    assert load_network("Asia") is load_network("asia")
    with pytest.raises(ValueError, match="unknown network 'hailfinder'"):
        load_network("hailfinder")


def test_parser_rejects_cycles_and_undeclared():
    bif = "variable a { type discrete [2] {x, y}; }\nvariable b { type discrete [2] {x, y}; }\n"
    with pytest.raises(ValueError, match="cycle"):
        parse_bif_structure(bif + "probability ( a | b ) { }\nprobability ( b | a ) { }", "loop")
    with pytest.raises(ValueError, match="undeclared variable 'c'"):
        parse_bif_structure(bif + "probability ( a | c ) { }\nprobability ( b ) { }", "typo")
