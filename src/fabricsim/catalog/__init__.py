"""Hardware catalog: GPUs, links, NICs, switches, cables, fabric and server presets.

The data lives in TOML files under ``catalog/data`` (one table per part, each with a
``source`` and, where sources disagree, a ``note`` saying which figure is used). This
package turns them into frozen, typed records with SI-unit properties.

Example
-------
>>> from fabricsim.catalog import get_catalog
>>> cat = get_catalog()
>>> sys = cat.system("dgx-h100")
>>> sys.gpus, sys.nics, sys.nic_bandwidth
(8, 8, 50000000000.0)
>>> cat.gpu(sys.gpu).bf16_flops
989400000000000.0
>>> sorted(cat.fabrics)[:3]
['efa', 'ib-hdr', 'ib-ndr']
"""

from fabricsim.catalog.loader import Catalog, data_dir, get_catalog, load_catalog, with_systems
from fabricsim.catalog.models import (
    CableSpec,
    FabricSpec,
    GpuSpec,
    LinkSpec,
    NicSpec,
    Spec,
    SwitchSpec,
    SystemSpec,
    TopologySpec,
)

__all__ = [
    "CableSpec",
    "Catalog",
    "FabricSpec",
    "GpuSpec",
    "LinkSpec",
    "NicSpec",
    "Spec",
    "SwitchSpec",
    "SystemSpec",
    "TopologySpec",
    "data_dir",
    "get_catalog",
    "load_catalog",
    "with_systems",
]
