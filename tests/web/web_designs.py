"""Small designs the web app's tests run."""

#: Two servers, IB NDR: runs in well under a second for every analytic kind.
SMALL = "name: small\ncluster:\n  system: dgx-h100\n  nodes: 2\n  fabric: ib-ndr\n"
TRAIN = SMALL + ("training:\n  model: llama3-8b\n  tp: 8\n  pp: 1\n  global_batch: 64\n"
                 "  micro_batch: 1\n  seq_len: 4096\n")
