"""Fast path of the analytic backend for clusters of identical servers.

Servers are copies of one template (global link id = ``link_base + server × n_template_links
+ local``), so a transfer's path is split by :meth:`ClusterRouter.segments` into template
segments (``(server, template path)``) and a network segment. The per-link load of all
template segments is one sparse product ``W[server, segment] · C[segment, local link]``
(``C`` holds the NVSwitch plane striping), and the per-class ``load / capacity`` maximum of a
template segment is evaluated per segment column over all servers at once. Transfers that
stay inside a server collapse, per template segment, to one representative (same latency,
largest per-class maximum over the servers that use it): the result equals the general
path exactly (``tests/backends/test_analytic.py`` checks it on random schedules).

Used only when every link is up, the fabric has no multi-server NVLink domain, and link
latencies are the template's on every server; otherwise the general path runs.

Example
-------
>>> import numpy as np
>>> from fabricsim.fabric import build_cluster
>>> fab = build_cluster("dgx-h100", 2)
>>> st = fast_structure(fab, fab.gpus[:8], np.roll(fab.gpus[:8], -1),
...                     np.zeros(8, np.uint64), np.ones(8))
>>> st is not None and bool(st[0].sum() > 0)
True
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from fabricsim.backends.analytic_shared import (
    adjacent_links,
    innet_rows,
    plane_groups,
    reduce_keys,
)
from fabricsim.fabric.cluster import ClusterRouter
from fabricsim.fabric.core import Fabric
from fabricsim.protocols import CLASS_RANK, LINK_CLASSES, link_class_of_kind

FloatArray = NDArray[np.float64]
I64 = NDArray[np.int64]
_CLASS_OF_KIND = link_class_of_kind().astype(np.int64)
_INNET_OF = np.array([LINK_CLASSES.index("nvls"), LINK_CLASSES.index("pcie"),
                      LINK_CLASSES.index("sharp")], dtype=np.int64)
_CLASS_RANK = CLASS_RANK
_N_CLS = len(LINK_CLASSES)

def _eligible(fabric: Fabric) -> bool:
    ok: bool = fabric.memo("analytic_fast.eligible", lambda: _uniform_servers(fabric))
    return ok and bool(fabric.link_up.all())


def _uniform_servers(fabric: Fabric) -> bool:
    """Every server is a copy of one template with the same latencies (no NVLink domain,
    no TPU slice)."""
    r = fabric.router
    ok = isinstance(r, ClusterRouter) and r.nvl is None and r.ici is None
    if ok and isinstance(r, ClusterRouter):
        lt, s0 = int(r.template.n_links), int(r.link_base)
        lat = fabric.link_latency[s0: s0 + lt * int(r.servers)].reshape(int(r.servers), lt)
        ok = bool((lat == lat[0]).all())
    return ok


def _link_tables(fabric: Fabric) -> tuple[FloatArray, NDArray[np.int8]]:
    """Per link (plus a pad entry at index ``-1``): latency (pad 0) and link class (pad
    :data:`_N_CLS`)."""
    def make() -> tuple[FloatArray, NDArray[np.int8]]:
        lat = np.append(fabric.link_latency.astype(np.float64), 0.0)
        cls = np.append(_CLASS_OF_KIND[fabric.link_kind], _N_CLS).astype(np.int8)
        return lat, cls

    hit: tuple[FloatArray, NDArray[np.int8]] = fabric.memo("analytic_fast.tables", make)
    return hit

#: Class of a (base class, in-network) pair, with the pad class mapping to itself.
_CLS_INNET = np.array([list(range(_N_CLS + 1)),
                       [*_INNET_OF.tolist(), 3, 4, _N_CLS]], dtype=np.int64)
#: Rank of a class (pad: 0).
_RANK_PAD = np.append(_CLASS_RANK, 0)


def _template_loads(wm: NDArray[np.float64] | NDArray[np.int64], rows: list[int],
                    cols: list[int], vals: list[float], lt: int) -> FloatArray:
    """``wm @ C`` for the sparse ``C[variant, local link]`` given as (row, col, value)
    entries (repeated entries add up in the order given). Each output entry adds its
    products in increasing variant order: ``C`` is held transposed in CSR form with sorted
    column indices, whose product with a dense matrix accumulates exactly so."""
    coef: dict[tuple[int, int], float] = {}
    for r_, c_, v_ in zip(rows, cols, vals, strict=True):
        coef[(c_, r_)] = coef.get((c_, r_), 0.0) + v_
    keys = sorted(coef)
    links = np.fromiter((k[0] for k in keys), dtype=np.int64, count=len(keys))
    variants = np.fromiter((k[1] for k in keys), dtype=np.int64, count=len(keys))
    data = np.fromiter((coef[k] for k in keys), dtype=np.float64, count=len(keys))
    indptr = np.zeros(lt + 1, dtype=np.int64)
    np.cumsum(np.bincount(links, minlength=lt), out=indptr[1:])
    ct = sparse.csr_matrix((data, variants, indptr), shape=(lt, wm.shape[1]))
    out: FloatArray = np.asarray(ct @ np.ascontiguousarray(wm.T, dtype=np.float64)).T
    return out


def _dense_ids(values: I64, size: int) -> tuple[I64, I64]:
    """(sorted distinct values, index of each value among them) for ints in ``[0, size)``:
    ``np.unique(values, return_inverse=True)`` without sorting."""
    present = np.zeros(size, dtype=bool)
    present[values] = True
    used = np.flatnonzero(present)
    rank = np.cumsum(present) - 1
    return used, rank[values]


def fast_structure(fabric: Fabric, src: NDArray[np.int32], dst: NDArray[np.int32],
                   hashes: NDArray[np.uint64], w: FloatArray
                   ) -> tuple[FloatArray, FloatArray, I64, FloatArray] | None:
    """(load per link, latency per key, class rank per key, per-class max per key), or
    ``None`` when the fabric does not qualify (see the module docstring)."""
    if not _eligible(fabric) or src.size == 0:
        return None
    r = fabric.router
    assert isinstance(r, ClusterRouter)
    lt, base, n_srv = int(r.template.n_links), int(r.link_base), int(r.servers)
    hi = base + lt * n_srv
    n = src.shape[0]
    innet = innet_rows(fabric, src, dst)
    direct, dlink = adjacent_links(fabric, src, dst, innet)
    ss, sd = r.node_server[src], r.node_server[dst]
    lean = ~direct & ~innet & (ss >= 0) & (ss == sd)   # inside one server: template only
    sa = np.where(lean, ss, -1).astype(np.int64)
    pa = np.full(n, -1, dtype=np.int64)
    li = np.flatnonzero(lean)
    if li.size:
        pa[li] = r.template_paths(r._local(src[li]), r._local(dst[li]), hashes[li])
    sb = np.full(n, -1, dtype=np.int64)
    pb = np.full(n, -1, dtype=np.int64)
    # network segments, kept only for the rows that have one: mid_rows[k] -> mid[k]
    rest = np.flatnonzero(~direct & ~lean)
    seg = r.segments(src[rest], dst[rest], hashes[rest], fabric.link_up) if rest.size else None
    table = r.template_table
    n_tab = table.shape[0]
    mids: list[I64] = []
    mid_rows: list[I64] = []
    if seg is not None:
        sa[rest], pa[rest], sb[rest], pb[rest] = seg.server_a, seg.path_a, seg.server_b, \
            seg.path_b
        mids.append(seg.mid)
        mid_rows.append(rest)
    d_idx = np.flatnonzero(direct)
    if d_idx.size:
        dl = dlink[d_idx]
        in_tpl = (dl >= base) & (dl < hi)
        t_rows = d_idx[in_tpl]
        sa[t_rows] = (dl[in_tpl] - base) // lt
        pa[t_rows] = n_tab + (dl[in_tpl] - base) % lt      # single-link template paths
        if (~in_tpl).any():
            mids.append(dl[~in_tpl][:, None])
            mid_rows.append(d_idx[~in_tpl])
    wmid = max([m.shape[1] for m in mids], default=1)
    mid = np.full((sum(m.shape[0] for m in mids) + 1, wmid), -1, dtype=np.int64)  # + pad row
    at = 0
    for m in mids:
        mid[at: at + m.shape[0], : m.shape[1]] = m
        at += m.shape[0]
    mid_row_ids = np.concatenate(mid_rows) if mid_rows else np.zeros(0, dtype=np.int64)
    if len(mid_rows) > 1:  # ascending rows, so that loads are summed in row order
        order = np.argsort(mid_row_ids, kind="stable")
        mid_row_ids = mid_row_ids[order]
        mid[:at] = mid[order]
    mid_of = np.full(n, -1, dtype=np.int64)             # row -> row of ``mid`` (-1: pad row)
    mid_of[mid_row_ids] = np.arange(at)
    group_of, gsize = plane_groups(fabric)
    mm_all = mid >= 0
    if mm_all.any() and (gsize[mid[mm_all]] > 1).any():
        return None  # striped NVLink links in a network segment: general path
    has_mid = np.zeros(n, dtype=bool)
    has_mid[mid_row_ids[mm_all[:at].any(axis=1)]] = True
    # ---- template segments: variants (template path, innet) used by any transfer
    width = max(table.shape[1], 1)
    full_tab = np.full((n_tab + lt, width), -1, dtype=np.int64)
    full_tab[:n_tab, : table.shape[1]] = table
    full_tab[n_tab:, 0] = np.arange(lt)
    has_a, has_b = pa >= 0, pb >= 0
    var_a = pa * 2 + innet
    var_b = pb * 2 + innet
    used, inv = _dense_ids(np.concatenate([var_a[has_a], var_b[has_b]]), 2 * (n_tab + lt))
    ja = np.full(n, -1, dtype=np.int64)
    jb = np.full(n, -1, dtype=np.int64)
    n_has_a = int(np.count_nonzero(has_a))
    ja[has_a] = inv[:n_has_a]
    jb[has_b] = inv[n_has_a:]
    nv = used.size
    # local plane groups (server 0) for striping
    loc_group = group_of[base: base + lt]
    loc_size = gsize[base: base + lt]
    members: dict[int, I64] = {}
    if (loc_group >= 0).any():
        for g in np.unique(loc_group[loc_group >= 0]).tolist():
            members[g] = np.flatnonzero(loc_group == g)
    tkind = _CLASS_OF_KIND[fabric.link_kind[base: base + lt]]
    tlat = fabric.link_latency[base: base + lt]
    c_rows: list[int] = []
    c_cols: list[int] = []
    c_vals: list[float] = []
    touch: list[list[tuple[I64, int]]] = []          # per variant: (local links, class)
    v_lat = np.zeros(nv)
    v_rank = np.zeros(nv, dtype=np.int64)
    for j, v in enumerate(used.tolist()):
        tp, inn = v // 2, bool(v % 2)
        path = full_tab[tp][full_tab[tp] >= 0]
        entries: list[tuple[I64, int]] = []
        for link in path.tolist():
            cls = int(tkind[link])
            if inn:
                cls = int(_INNET_OF[cls])
            if loc_size[link] > 1 and not inn:
                mem = members[int(loc_group[link])]
                c_rows += [j] * mem.size
                c_cols += mem.tolist()
                c_vals += [1.0 / mem.size] * mem.size
                entries.append((mem, cls))
            else:
                c_rows.append(j)
                c_cols.append(link)
                c_vals.append(1.0)
                entries.append((np.array([link]), cls))
            v_rank[j] = max(v_rank[j], int(_CLASS_RANK[cls]))
        v_lat[j] = float(tlat[path].sum())
        touch.append(entries)
    # template parts only for the servers some transfer uses (u: index among them)
    used_srv, u_ab = _dense_ids(np.concatenate([sa[has_a], sb[has_b]]), n_srv)
    nu = used_srv.size
    u_of = np.full(n_srv, -1, dtype=np.int64)
    u_of[used_srv] = np.arange(nu)
    wm = np.bincount(u_ab * nv + np.concatenate([ja[has_a], jb[has_b]]),
                     weights=np.concatenate([w[has_a], w[has_b]]),
                     minlength=nu * nv).reshape(nu, nv)
    load = np.zeros(fabric.n_links)
    t_links = (base + used_srv[:, None] * lt + np.arange(lt)[None, :]).ravel() \
        if nu < n_srv else slice(base, hi)
    load[t_links] = _template_loads(wm, c_rows, c_cols, c_vals, lt).ravel()
    if has_mid.any():
        rows_m = mid_row_ids
        mm = mm_all[:at]
        m_links = mid[:at][mm]
        m_w = np.broadcast_to(w[rows_m][:, None], mm.shape)[mm]
        if 8 * m_links.size < fabric.n_links:  # few: no full-size temporary
            np.add.at(load, m_links, m_w)
        else:
            load += np.bincount(m_links, weights=m_w, minlength=fabric.n_links)
    ratio_t = (load[t_links] / fabric.link_capacity[t_links]).reshape(nu, lt)
    # per class, per (used server, variant): max load/capacity over the variant's links
    metric: dict[int, FloatArray] = {}
    for j, entries in enumerate(touch):
        for links, cls in entries:
            col = ratio_t[:, links].max(axis=1)
            arr = metric.setdefault(cls, np.zeros((nu, nv)))
            np.maximum(arr[:, j], col, out=arr[:, j])
    # transfers inside one server: one representative per variant
    intra = has_a & ~has_b & ~has_mid
    lat_parts: list[FloatArray] = []
    rank_parts: list[I64] = []
    cm_parts: list[FloatArray] = []
    if intra.any():
        cnt = np.bincount(u_of[sa[intra]] * nv + ja[intra], minlength=nu * nv).reshape(nu, nv)
        seen = cnt > 0
        rep = np.flatnonzero(seen.any(axis=0))
        cm = np.zeros((rep.size, _N_CLS))
        for cls, arr in metric.items():
            cm[:, cls] = np.where(seen, arr, 0.0).max(axis=0)[rep]
        lat_parts.append(v_lat[rep])
        rank_parts.append(v_rank[rep])
        cm_parts.append(cm)
    empty = ~has_a & ~has_b & ~has_mid
    if empty.any():
        lat_parts.append(np.zeros(1))
        rank_parts.append(np.zeros(1, dtype=np.int64))
        cm_parts.append(np.zeros((1, _N_CLS)))
    cross = np.flatnonzero(~intra & ~empty)
    if cross.size:
        lat_pad, cls_pad = _link_tables(fabric)
        mc = mid[mid_of[cross]]                          # pad row / pad entries: -1
        ok = mc >= 0
        cls_m = _CLS_INNET[innet[cross].astype(np.int64)[:, None], cls_pad[mc]]
        lat = lat_pad[mc].sum(axis=1)
        rank = _RANK_PAD[cls_m].max(axis=1)
        r_m = np.where(ok, load[mc] / fabric.link_capacity[mc], 0.0)
        cm = np.zeros((cross.size, _N_CLS))
        for cls in np.unique(cls_m[ok]).tolist():
            cm[:, cls] = np.where(cls_m == cls, r_m, 0.0).max(axis=1)
        for s_arr, j_arr in ((sa, ja), (sb, jb)):
            jj = j_arr[cross]
            hs = jj >= 0
            if not hs.any():
                continue
            lat[hs] += v_lat[jj[hs]]
            rank[hs] = np.maximum(rank[hs], v_rank[jj[hs]])
            srv_h = u_of[s_arr[cross][hs]]
            for cls, arr in metric.items():
                cm[hs, cls] = np.maximum(cm[hs, cls], arr[srv_h, jj[hs]])
        lat_parts.append(lat)
        rank_parts.append(rank.astype(np.int64))
        cm_parts.append(cm)
    lat_k, rank_k, cm_k = reduce_keys(np.concatenate(lat_parts), np.concatenate(rank_parts),
                                       np.concatenate(cm_parts))
    return load, lat_k, rank_k, cm_k
