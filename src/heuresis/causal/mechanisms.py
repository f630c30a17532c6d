"""Mechanism kinds of docs/design.md §3.2, one registered function each.

A mechanism function draws its own parameters and noise and returns the *signal* (the map of
the parents) and the *noise term* separately, so that the generator can standardize the map
output on the sample (a family setting) before adding the noise:

    signal, noise, params = fn(rng, u, sigma, constants)
    x = signal + noise

``u`` is the (n, p) parent matrix — standardized column-wise on the sample for kinds registered
with ``standardize_parents=True`` (the nonlinear ones), raw for the linear kinds; ``sigma`` is
the node's noise scale (``None`` for kinds whose noise scale is input-dependent); ``constants``
are the kind's constants from the config (``mechanisms.<kind>`` merged with a family's
``params``).  ``params`` is a JSON-serializable record of every drawn parameter, stored in the
hidden truth.

Adding a kind is one function decorated with :func:`register_mechanism`; its constants go in
the config under ``mechanisms``, their types and ranges in the config schema under
``properties.mechanisms.properties.<kind>`` (an undeclared kind gets generic checks only).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from heuresis.registry import Registry

__all__ = ["MECHANISMS", "MechanismKind", "register_mechanism", "softplus", "standardize"]

MechanismFn = Callable[[np.random.Generator, np.ndarray, "float | None", dict], tuple[np.ndarray, np.ndarray, dict]]


@dataclass(frozen=True)
class MechanismKind:
    """A registered mechanism kind.

    Attributes
    ----------
    name : str
        The kind's name in config, artifacts and tables.
    fn : callable
        ``fn(rng, u, sigma, constants) -> (signal, noise, params)``.
    uses_noise_scale : bool
        Whether the kind takes a noise scale sigma (a family must then give a ``noise`` range).
    standardize_parents : bool
        Whether the parents are standardized on the sample before the map (nonlinear kinds).
    signed_constants : tuple of str
        Constants whose ranges may hold negative values (all others must be >= 0).
    """

    name: str
    fn: MechanismFn
    uses_noise_scale: bool
    standardize_parents: bool
    signed_constants: tuple[str, ...] = ()


MECHANISMS = Registry("mechanism kind", entry_points="heuresis.mechanisms")


def register_mechanism(name: str, *, uses_noise_scale: bool = True, standardize_parents: bool = True,
                       signed_constants: tuple[str, ...] = ()):
    """Register a mechanism function under ``name`` (see module docstring for its contract)."""

    def deco(fn: MechanismFn) -> MechanismFn:
        MECHANISMS.add(name, MechanismKind(name, fn, uses_noise_scale, standardize_parents, signed_constants))
        return fn

    return deco


# --- shared pieces ------------------------------------------------------------------------
def standardize(x: np.ndarray, axis: int = 0) -> np.ndarray:
    """Center and scale to unit variance (population sd); constant columns are only centered."""
    x = np.asarray(x, dtype=float)
    mu = x.mean(axis=axis, keepdims=True)
    sd = x.std(axis=axis, keepdims=True)
    return (x - mu) / np.where(sd > 0, sd, 1.0)


def softplus(x: np.ndarray) -> np.ndarray:
    """Return ``log(1 + exp(x))`` elementwise, computed without overflow."""
    return np.logaddexp(0.0, x)


def _uniform(rng: np.random.Generator, bounds) -> float:
    lo, hi = bounds
    return float(rng.uniform(lo, hi))


def _signed_uniform(rng: np.random.Generator, bounds, size=None) -> np.ndarray | float:
    """Magnitude ~ U[lo, hi] with an independent random sign."""
    lo, hi = bounds
    mag = rng.uniform(lo, hi, size=size)
    sign = rng.choice([-1.0, 1.0], size=size)
    return mag * sign


def _unit_vector(rng: np.random.Generator, p: int) -> np.ndarray:
    w = rng.standard_normal(p)
    return w / np.linalg.norm(w)


def _gaussian_noise(rng: np.random.Generator, n: int, sigma: float) -> np.ndarray:
    return sigma * rng.standard_normal(n)


def _mlp(rng: np.random.Generator, u: np.ndarray, c: dict) -> tuple[np.ndarray, dict[str, Any]]:
    """A random one-hidden-layer tanh MLP applied to u."""
    p, h = u.shape[1], int(c["hidden"])
    w1 = rng.normal(0.0, c["input_weight_sd"], size=(p, h))
    b1 = rng.normal(0.0, c["bias_sd"], size=h)
    w2 = rng.normal(0.0, c["output_weight_sd"], size=h)
    out = np.tanh(u @ w1 + b1) @ w2
    return out, {"w1": w1.tolist(), "b1": b1.tolist(), "w2": w2.tolist()}


# --- the ten kinds ------------------------------------------------------------------------
@register_mechanism("linear", standardize_parents=False)
def linear(rng, u, sigma, c):
    """X = sum_i w_i X_i + sigma eps, |w_i| ~ U[weight], random sign, eps ~ N(0, 1)."""
    w = np.atleast_1d(_signed_uniform(rng, c["weight"], size=u.shape[1]))
    return u @ w, _gaussian_noise(rng, u.shape[0], sigma), {"w": w.tolist()}


@register_mechanism("linear_t3", standardize_parents=False)
def linear_t3(rng, u, sigma, c):
    """As ``linear`` with Student-t(df) noise scaled to unit variance (heavy tails)."""
    df = float(c["df"])
    if df <= 2:
        raise ValueError(f"linear_t3 needs df > 2 for a finite variance, got df={df}")
    w = np.atleast_1d(_signed_uniform(rng, c["weight"], size=u.shape[1]))
    eps = rng.standard_t(df, size=u.shape[0]) / np.sqrt(df / (df - 2.0))
    return u @ w, sigma * eps, {"w": w.tolist(), "df": df}


@register_mechanism("mlp")
def mlp(rng, u, sigma, c):
    """X = f(u) + sigma eps, f a random one-hidden-layer tanh MLP."""
    f, params = _mlp(rng, u, c)
    return f, _gaussian_noise(rng, u.shape[0], sigma), params


@register_mechanism("mlp_hetero", uses_noise_scale=False)
def mlp_hetero(rng, u, sigma, c):
    """X = f(u) + g(u) eps, g = softplus(MLP'(u)) + floor; f and MLP' independent."""
    f, pf = _mlp(rng, u, c)
    s, ps = _mlp(rng, u, c)
    g = softplus(s) + float(c["scale_floor"])
    return f, g * rng.standard_normal(u.shape[0]), {"f": pf, "scale": ps, "scale_floor": c["scale_floor"]}


@register_mechanism("piecewise", signed_constants=("knot",))
def piecewise(rng, u, sigma, c):
    """X = phi(z) + sigma eps; phi piecewise linear, one knot, independently signed slopes."""
    w = _unit_vector(rng, u.shape[1])
    knot = _uniform(rng, c["knot"])
    s1, s2 = (float(v) for v in _signed_uniform(rng, c["slope"], size=2))
    z = u @ w
    phi = np.where(z < knot, s1 * (z - knot), s2 * (z - knot))
    return phi, _gaussian_noise(rng, u.shape[0], sigma), {"w": w.tolist(), "knot": knot, "slopes": [s1, s2]}


@register_mechanism("sigmoid")
def sigmoid(rng, u, sigma, c):
    """X = tanh(a z) + sigma eps."""
    w = _unit_vector(rng, u.shape[1])
    a = float(_signed_uniform(rng, c["gain"]))
    return np.tanh(a * (u @ w)), _gaussian_noise(rng, u.shape[0], sigma), {"w": w.tolist(), "a": a}


@register_mechanism("sigmoid_hetero", uses_noise_scale=False)
def sigmoid_hetero(rng, u, sigma, c):
    """X = tanh(a z) + (softplus(b z) + floor) eps."""
    w = _unit_vector(rng, u.shape[1])
    a = float(_signed_uniform(rng, c["gain"]))
    b = float(_signed_uniform(rng, c["scale_gain"]))
    z = u @ w
    g = softplus(b * z) + float(c["scale_floor"])
    return np.tanh(a * z), g * rng.standard_normal(u.shape[0]), {"w": w.tolist(), "a": a, "b": b,
                                                                  "scale_floor": c["scale_floor"]}


@register_mechanism("quadratic")
def quadratic(rng, u, sigma, c):
    """X = z^2 + sigma eps (non-monotone)."""
    w = _unit_vector(rng, u.shape[1])
    return (u @ w) ** 2, _gaussian_noise(rng, u.shape[0], sigma), {"w": w.tolist()}


@register_mechanism("abs")
def abs_(rng, u, sigma, c):
    """X = |z| + sigma eps (non-monotone)."""
    w = _unit_vector(rng, u.shape[1])
    return np.abs(u @ w), _gaussian_noise(rng, u.shape[0], sigma), {"w": w.tolist()}


@register_mechanism("fourier")
def fourier(rng, u, sigma, c):
    """X = sum_k a_k cos(omega_k z + phase_k) + sigma eps (random Fourier features of z)."""
    w = _unit_vector(rng, u.shape[1])
    k = int(c["features"])
    omega = rng.uniform(*c["frequency"], size=k)
    phase = rng.uniform(0.0, 2.0 * np.pi, size=k)
    amp = rng.normal(0.0, 1.0 / np.sqrt(k), size=k)
    z = u @ w
    phi = np.cos(np.outer(z, omega) + phase) @ amp
    return phi, _gaussian_noise(rng, u.shape[0], sigma), {"w": w.tolist(), "omega": omega.tolist(),
                                                           "phase": phase.tolist(), "amplitude": amp.tolist()}
