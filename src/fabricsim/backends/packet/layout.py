"""Column indices of the engine's state arrays (shared by :mod:`engine` and :mod:`build`).

The engine keeps its state in a handful of 2-D numpy arrays (one row per link, queue,
flow, packet or step) so that numba can compile it; these integers name the columns.

Example
-------
>>> E_TXDONE, E_ARRIVE
(0, 1)
"""

# ---- event kinds
E_TXDONE = 0      # a = link: serialisation of the packet on a link ended
E_ARRIVE = 1      # a = packet: (head or whole of) a packet reached the next node
E_PAUSE = 2       # a = queue (link * NP + prio), b = 1 pause / 0 resume, at the upstream end
E_CREDIT = 3      # a = queue, b = bytes returned to the upstream end (credit-based links)
E_INJECT = 4      # a = flow: pacing timer of the sender
E_ACK = 5         # a = flow, b = rep << 32 | cumulative packet number
E_NAK = 6         # a = flow, b = rep << 32 | expected packet number
E_CNP = 7         # a = flow: congestion notification reached the sender
E_DCQ_ALPHA = 8   # a = flow: DCQCN alpha-update timer
E_DCQ_INC = 9     # a = flow, b = epoch: DCQCN rate-increase timer
E_RTO = 10        # a = flow: retransmission timer
E_STEP = 11       # a = step: start the next repetition of a step
E_WD_CHECK = 12   # a = queue, b = pause epoch: PFC watchdog detection timer
E_WD_RESTORE = 13  # a = queue: PFC watchdog restoration timer
E_STUCK = 14      # b = 1 receiver stops draining / 0 resumes
E_LINK = 15       # a = timed link fault (row of FT), b = 1 enters its fault / 0 recovers
E_DL_CHECK = 16   # PFC deadlock / stall check (every P_DL_WINDOW while ports are paused)
E_PULL = 17       # a = node: the RCCC credit pacer of a UET receiver grants its next packet
E_GRANT = 18      # a = flow, b = bytes: an RCCC credit grant reached the UET sender
N_EVENT_KINDS = 19
MASK32 = (1 << 32) - 1  # the low 32 bits of an ACK/NAK payload: the packet number

# ---- counters (int64 array C); 0..2 belong to the kernel
C_FREE = 3
C_EVENTS = 4
C_ERR = 5
C_DROP_LOSSLESS = 6
C_DROP_LOSSY = 7
C_DROP_WD = 8
C_DROP_LOSS = 9
C_RETX = 10
C_TIMEOUTS = 11
C_PAUSES = 12
C_CNPS = 13
C_DATA_PKTS = 14
C_DELIVERED = 15
C_ECN = 16
C_WD_TRIG = 17
C_NAKS = 18
C_STEPS_DONE = 19
C_NREC = 20
C_NPAUSED = 21
C_STALE = 22
C_HOP_PKTS = 23
C_POOL_HIGH = 24
C_DROP_DOWN = 25   # packets sent onto a link that is down (Ethernet: blackholed)
C_DROP_NOPFC = 26  # lossless-class packets dropped where a port does not pause the class
C_DL_ARMED = 27    # 1 while a deadlock check is pending
C_DL_TXC = 28      # transmissions counted at the last deadlock check
C_NDOWN = 29       # links currently down
C_LINK_FLIPS = 30  # timed link faults entered or recovered
C_RETRY_FLOW = 31  # the flow that exceeded its retry limit (ERR_RETRY)
C_NDOWN_PERM = 32  # links down for good (a timed link_down that never recovers)
C_TRIMS = 33       # UET: packets a switch trimmed to their headers
C_LLR = 34         # UET: frames corrupted on a link and sent again by link-level retry
C_GRANTS = 35      # UET: RCCC credit grants sent by receivers
N_C = 36

# ---- error codes (C[C_ERR])
ERR_NONE = 0
ERR_HEAP = 1
ERR_POOL = 2
ERR_BUDGET = 3
ERR_DEADLOCK = 4
ERR_UNTIL = 5
ERR_PFC_DEADLOCK = 6  # a cycle of paused ports made no progress for a whole window
ERR_STALL = 7         # nothing moved for a whole window while a link was down for good
ERR_RETRY = 8         # a flow timed out more than retry_limit times in a row (QP error)

# ---- float parameters P
P_MTU = 0
P_HDR = 1
P_XOFF = 2
P_XON = 3
P_HEADROOM = 4
P_LOSSY_Q = 5
P_KMIN = 6
P_KMAX = 7
P_PMAX = 8
P_G = 9
P_RAI = 10
P_RHAI = 11
P_T_INC = 12
P_T_ALPHA = 13
P_BYTE_CNT = 14
P_CNP_INT = 15
P_MIN_RATE = 16
P_LOSS = 17
P_RTO = 18
P_WD_TIME = 19
P_WD_RESTORE = 20
P_STUCK_T0 = 21
P_STUCK_T1 = 22
P_UNTIL = 23
P_BIN_DT = 24
P_INIT_CWND = 25
P_WINDOW = 26
P_CUT_HDR = 27
P_SRD_TARGET = 28  # SRD: queueing delay allowed above a path's base RTT (s)
P_SRD_AI = 29      # SRD: additive increase, packets per RTT per path
P_SRD_BETA = 30    # SRD: multiplicative decrease per unit of excess delay
P_SRD_MDF = 31     # SRD: largest decrease factor per RTT (and on a loss)
P_SRD_MINCW = 32   # SRD: smallest per-path window (packets; below 1 the path is paced)
P_DEC_PERIOD = 33  # DCQCN: shortest time between two rate decreases (rate_reduce_monitor_period)
P_FR_STEPS = 34    # DCQCN: increase events of fast recovery (rpg_threshold, the paper's F)
P_CLAMP = 35       # DCQCN: target rate on a decrease: 0 kept, 1 after a timer increase, 2 always
P_DL_WINDOW = 36   # PFC deadlock detection: no progress for this long (s; inf: off)
P_TRIM = 37        # UET: egress queue bytes above which an arriving packet is trimmed
P_TRIM_SIZE = 38   # UET: wire bytes of a trimmed packet (its headers)
P_NSCC_GAMMA = 39  # NSCC: multiplicative-decrease gain per unit of excess delay
P_NSCC_MAXMD = 40  # NSCC: largest decrease per base RTT
P_NSCC_FI = 41     # NSCC: fair increase, bytes per RTT
P_NSCC_QA = 42     # NSCC: quick adapt when the delay exceeds this many targets
N_P = 43

# ---- int parameters IP
I_NP = 0          # priorities (traffic classes)
I_MODE = 1        # 0 ib, 1 roce, 2 tcp, 3 srd, 4 uet
I_DCQCN = 2
I_WD = 3
I_CUT = 4         # cut-through switching
I_ADAPTIVE = 5    # adaptive routing (least-queued path at injection)
I_SPRAY = 6       # per-packet spraying over the flow's paths
I_SELECTIVE = 7   # receiver accepts out-of-order packets (bitmap)
I_TCP = 8         # TCP-like window, dup-ACK fast retransmit
I_ACK_EVERY = 9
I_BUDGET = 10
I_SEED = 11
I_NWATCH = 12
I_NFLOW_TS = 13
I_NBINS = 14
I_SRDCC = 15       # SRD per-path congestion control + selective retransmission
I_DL = 16          # PFC deadlock / stall detection on
I_RETRY = 17       # timeouts in a row a go-back-N / TCP flow survives
I_UET = 18         # UET sender/receiver (spraying, trim NACKs, NSCC or RCCC)
I_TRIM = 19        # UET: switches trim packets above P_TRIM
I_RCCC = 20        # UET: receiver credit-based congestion control (else NSCC)
I_REPS = 21        # UET: REPS load balancing (recycle unmarked entropies), else oblivious
N_I = 22

MODE_IB, MODE_ROCE, MODE_TCP, MODE_SRD, MODE_UET = 0, 1, 2, 3, 4

# ---- per link ints LI
LI_SRC = 0
LI_DST = 1
LI_BUSY = 2
LI_RR = 3
LI_CREDIT = 4     # 1: credit-based flow control on this link
LI_LOSSY = 5      # 1: random loss applies
LI_ECN = 6        # 1: ECN marking at this egress
LI_WATCH = 7      # watched-link index or -1
LI_TX_INL = 8
LI_TX_PRIO = 9
LI_TX_SIZE = 10
LI_TX_LOST = 11   # packet id when the packet in flight is lost, else -1
LI_DST_EP = 12    # 1: the link enters an endpoint (flow destinations)
LI_DOWN = 13      # 1: the link is down (timed fault): credit links stall, others lose
LI_NOPFC = 14     # bit p set: the downstream port does not pause class p (misconfigured)
LI_TXC = 15       # packets started on the link (progress, for the deadlock check)
LI_TXC_LAST = 16  # LI_TXC at the previous deadlock check
LI_DLK = 17       # 1: the link's port is part of a detected deadlock
LI_LLR = 18       # 1: link-level retry (UET): a corrupted frame is resent by the link
LI_CBFC = 19      # 1: Ethernet credit-based flow control (UET): credits, but a down link drops
LI_TRIM = 20      # 1: the link leaves a switch that trims (UET)
N_LI = 21

# ---- per link floats LF
LF_CAP = 0
LF_LAT = 1
LF_QTOT = 2
LF_BYTES = 3
LF_QMAX = 4
LF_CAP0 = 5       # nominal capacity (a timed degradation scales LF_CAP from it)
N_LF = 6

# ---- per queue (link * NP + prio) ints QI
Q_HEAD = 0
Q_TAIL = 1
Q_N = 2
Q_PAUSED = 3       # paused by the downstream end
Q_PAUSE_SENT = 4   # (as ingress at the downstream node) we asked upstream to pause
Q_WD = 5           # watchdog storm state
Q_EPOCH = 6
N_QI = 7

# ---- per queue floats QF
QF_BYTES = 0      # egress queue bytes
QF_IN = 1         # ingress bytes held at the downstream node (PFC accounting)
QF_CRED = 2       # credits at the upstream end
QF_T0 = 3         # pause start
QF_PAUSE = 4      # total paused time
QF_FIRST = 5      # first time paused (-1: never)
N_QF = 6

# ---- per class ints (CL)
CL_LOSSLESS = 0   # PFC on this class (Ethernet links)
CL_ECN = 1
N_CL = 2

# ---- per flow ints FI
F_SRC = 0
F_DST = 1
F_PRIO = 2
F_NPKT = 3
F_SND_NEXT = 4
F_SND_UNA = 5
F_MAX_SENT = 6
F_RCV_NEXT = 7
F_RCV_CNT = 8
F_QUEUED = 9
F_INJ_PEND = 10
F_STEP = 11
F_REP = 12
F_DONE = 13
F_NPATH = 14
F_DUP = 15
F_INREC = 16
F_RECOVER = 17
F_NAK_SENT = 18
F_BM = 19
F_IT = 20
F_IB = 21
F_INC_EPOCH = 22
F_ALPHA_ON = 23
F_RTO_ON = 24
F_ACKCNT = 25
F_RTX = 26
F_ACTIVE = 27
F_SPRAY = 28       # 0 one path, 1 round-robin striping (NVLink), 2 random (SRD)
F_RR = 29
F_NLOST = 30       # SRD: packets declared lost and not yet retransmitted
F_NTO = 31         # retransmission timeouts in a row without progress
F_RQ_HEAD = 32     # UET REPS: first slot of the ring of entropies to recycle (SPF[f, :, SP_RQ])
F_RQ_N = 33        # UET REPS: entropies waiting in that ring
N_FI = 34

# ---- per flow floats FF
FF_SIZE = 0
FF_RATE = 1
FF_TARGET = 2
FF_ALPHA = 3
FF_LINE = 4
FF_NEXT_T = 5
FF_BYTE_CNT = 6
FF_LAST_CNP = 7
FF_CNP_SEEN = 8
FF_PROGRESS = 9
FF_START = 10
FF_RET_LAT = 11
FF_CWND = 12
FF_SSTHRESH = 13
FF_HDR = 14       # wire bytes added to every packet of the flow (headers, framing)
FF_PROTO = 15     # payload bytes/s the NCCL protocol lets the sender push (0: no limit)
FF_ALPHA_T = 16   # DCQCN: time alpha was last brought up to date (-1: no CNP yet)
FF_LAST_DEC = 17  # DCQCN / NSCC: time of the last rate or window decrease (-1: none)
FF_INFL = 18      # UET: wire bytes in flight
FF_BRTT = 19      # UET: base RTT of the flow (s)
FF_TGT = 20       # NSCC: target queueing delay (s)
FF_MAXW = 21      # NSCC: largest window (bytes)
FF_ACH = 22       # NSCC: bytes acknowledged in the current quick-adapt period
FF_QA_T = 23      # NSCC: end of the current quick-adapt period
FF_QA_TRIG = 24   # NSCC: 1 when the period saw a delay above the quick-adapt threshold or a trim
FF_CREDIT = 25    # RCCC: bytes the sender may still send
FF_NEED = 26      # RCCC: bytes the receiver has still to grant
FF_CRED0 = 27     # RCCC: speculative credit at the start of a repetition
FF_RACK = 28      # UET: latest send time of a packet acknowledged (later ones reveal losses)
FF_FREEZE = 29    # UET REPS: after a timeout, explore no unknown entropy before this time
N_FF = 30

# ---- per packet ints PK
PK_FLOW = 0
PK_SEQ = 1
PK_SIZE = 2
PK_HOP = 3
PK_PBASE = 4
PK_PLEN = 5
PK_PRIO = 6
PK_ECN = 7
PK_REP = 8
PK_INL = 9
PK_NEXT = 10
PK_PATH = 11      # index of the flow's path the packet took
PK_TRIM = 12      # 1: a switch trimmed the packet to its headers (UET)
N_PK = 13

# ---- SRD per sent packet (SQ, float rows; offset FI[f, F_BM] + seq)
SQ_T = 0          # time of the latest transmission
SQ_ST = 1         # 0 not sent, 1 in flight, 2 acknowledged, 3 lost (to retransmit)
SQ_K = 2          # path index of the latest transmission
SQ_SER = 3        # its serial number on that path
N_SQ = 4
SQ_INFLIGHT, SQ_ACKED, SQ_LOST = 1, 2, 3

# ---- SRD per flow and path (SPF[f, k, :])
SP_INFL = 0       # packets in flight on the path
SP_NSER = 1       # next serial number on the path
SP_EXP = 2        # lowest serial not yet acknowledged or declared lost (in order)
SP_CWND = 3       # congestion window (packets); UET: 1 usable, 0 failed (until SP_NEXT)
SP_SRTT = 4       # smoothed RTT
SP_BASE = 5       # lowest RTT seen (the path's base RTT)
SP_LDEC = 6       # time of the last window decrease
SP_NEXT = 7       # earliest next send when the window is below one packet (UET: path avoided until)
SP_INIT = 8       # initial window (path's share of the bandwidth-delay product)
SP_LACK = 9       # time of the path's latest ACK (a silent path has none for a timeout)
SP_PEN = 10       # UET REPS: penalty, explorations that pass over this entropy
SP_RQ = 11        # UET REPS: slot k of the flow's recycle ring (an entropy index)
N_SPF = 12

# ---- per step ints SI / floats SF
S_FOFF = 0
S_NF = 1
S_REPEAT = 2
S_REP = 3
S_REMAIN = 4
S_NDEP = 5
S_DONE = 6
N_SI = 7
SF_DELAY = 0
SF_START = 1
SF_END = 2
SF_HOP = 3        # protocol overhead before every repetition (s)
N_SF = 4

# ---- per node
N_BUF = 0
N_USED = 1
N_MAXUSED = 2
N_PULL_T = 3      # RCCC: earliest time the node's credit pacer may grant again
N_PULL_ON = 4     # RCCC: 1 while the pacer has a grant scheduled
N_PULL_RR = 5     # RCCC: round-robin position among the node's incoming flows
N_PULL_RATE = 6   # RCCC: bytes/s the pacer grants
N_NF = 7
# ---- timed link faults FT (float rows, one per faulted link)
FT_LINK = 0       # link id
FT_START = 1      # first time the fault can act (s)
FT_PERIOD = 2     # flapping period (s; inf: a permanent fault from FT_START)
FT_DUTY = 3       # share of every period the link is up (0 for a permanent fault)
FT_FACTOR = 4     # capacity left while faulted (0: down)
N_FT = 5
