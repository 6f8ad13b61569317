"""Exact conversion of trace timestamps (µs, as int, float or decimal string) to int64 ns.

Ascend writes ``"ts": "1704161511420306.491"``; a float64 at 1.7e15 µs has a 0.25 µs grid, so
strings are parsed digit by digit and never pass through float64.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import numpy as np

NA_NS = np.iinfo(np.int64).min  # sentinel for "no timestamp" inside int64 arrays
NS_MAX_US = "9223372036854775.807"  # the largest µs time int64 ns hold (2262-04-11 as Unix time)
_NA_TEXT = {"", "N/A", "NA", "n/a", "nan", "NaN", "None", "null", "-", "inf", "-inf", "Infinity"}


def str_us_to_ns(text: str | bytes) -> int | None:
    """'1704161511420306.491' (µs) -> 1704161511420306491 (ns), exactly; None when not a number."""
    return parse_scaled(text, 3)


def parse_scaled(text: str | bytes, digits: int) -> int | None:
    """Decimal text times 10**digits as an exact int (digits=3: µs->ns, 6: ms->ns)."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("ascii", "replace")
    s = text.strip().strip('"').strip()
    if s in _NA_TEXT or not s.isascii():  # "١٢" is a digit string to str.isdigit(), not to us
        return None
    neg = s.startswith("-")
    body = s[1:] if neg or s.startswith("+") else s
    whole, _, frac = body.partition(".")
    if (whole.isdigit() or (whole == "" and frac)) and (frac == "" or frac.isdigit()):
        ns = int(whole or "0") * 10**digits + int((frac + "0" * digits)[:digits] or "0")
        if len(frac) > digits and frac[digits] >= "5":  # round half up
            ns += 1
        return -ns if neg else ns
    try:
        value = Decimal(s) * 10**digits
    except InvalidOperation:
        return None
    if not value.is_finite():
        return None
    return int(value.to_integral_value(rounding=ROUND_HALF_UP))


# ---- vectorised exact parse of raw JSON tokens -------------------------------------------------

_MAX_SHAPES = 8  # token lengths parsed one length at a time; more: the general path
_MAX_WIDTH = 40  # longer tokens (never seen in real traces) take the per-token path
_MAX_INT_DIGITS = 18  # 10**18 - 1 fits int64; the ns product is range-checked below
_POW10 = 10 ** np.arange(19, dtype=np.int64)
#: the largest whole µs that int64 ns hold (readers that convert µs themselves check against it)
NS_LIMIT_US = (int(np.iinfo(np.int64).max) - 999) // 1000
_DIGIT0, _DOT, _MINUS, _QUOTE = 48, 46, 45, 34
#: the longest ts token read at all: a µs time to the ns past 2262 is 24 characters with its
#: quotes and sign, and a fraction written to 30 places still fits. A longer one (a hostile
#: 64 MB run of digits) is no time: it stays NA, unread, and the reader counts it as a bad
#: number (issue 42), instead of a per-byte parse of it (11x the file in memory, 35 s)
MAX_TOKEN_BYTES = 64


def tokens_us_to_ns(buf: bytes, lens: np.ndarray) -> np.ndarray:
    """Raw JSON tokens of µs (``"1736408883704643.212"``, ``1669783687464181``, ``5.5``,
    ``null``) joined into ``buf`` with their byte lengths ``lens`` -> exact int64 ns (NA_NS where
    the token is not a number). Digit arithmetic over a (tokens x width) byte matrix: no Python
    work per token and never through float64; odd tokens (exponents, escapes, spaces) fall back
    to :func:`parse_scaled` one by one."""
    lens = np.asarray(lens, dtype=np.int64)
    n = len(lens)
    out = np.full(n, NA_NS, dtype=np.int64)
    if n == 0:
        return out
    if lens.max() > MAX_TOKEN_BYTES:  # too long to be a time: NA, the others read without it
        return _without_long(buf, lens, out)
    b = np.frombuffer(buf, dtype=np.uint8)
    if lens[0] >= 1 and (lens == lens[0]).all():
        same = _same_layout(b.reshape(n, int(lens[0])))
        if same is not None:
            return same
    starts = np.cumsum(lens) - lens
    sizes, counts = np.unique(lens, return_counts=True)
    if len(sizes) <= _MAX_SHAPES:  # a few token shapes (e.g. strings plus `null`): each in bulk
        pad = np.concatenate([b, np.zeros(int(sizes.max()), np.uint8)])
        for size, count in zip(sizes.tolist(), counts.tolist(), strict=True):
            rows = np.flatnonzero(lens == size) if count < n else np.arange(n)
            if size == 4 or size < 1:
                out[rows] = _general(pad, buf, starts[rows], lens[rows])
                continue
            m = np.lib.stride_tricks.sliding_window_view(pad, size)[starts[rows]]
            same = _same_layout(m) if count > 1 else None
            out[rows] = same if same is not None else _general(pad, buf, starts[rows], lens[rows])
        return out
    return _general(b, buf, starts, lens)


def _without_long(buf: bytes, lens: np.ndarray, out: np.ndarray) -> np.ndarray:
    """:func:`tokens_us_to_ns` of the tokens no longer than :data:`MAX_TOKEN_BYTES`; the
    longer ones keep ``out``'s NA_NS. (A Python loop per token: only a hostile file has one.)"""
    starts = (np.cumsum(lens) - lens).tolist()
    keep = np.flatnonzero(lens <= MAX_TOKEN_BYTES)
    short = b"".join(buf[starts[i] : starts[i] + int(lens[i])] for i in keep.tolist())
    out[keep] = tokens_us_to_ns(short, lens[keep])
    return out


def _general(b: np.ndarray, buf: bytes, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    out = np.empty(len(lens), np.int64)
    for lo in range(0, len(lens), _BLOCK):  # bounds the temporaries of the matrix arithmetic
        hi = min(len(lens), lo + _BLOCK)
        out[lo:hi] = _parse_block(b, buf, starts[lo:hi], lens[lo:hi])
    return out


_BLOCK = 1 << 16
_CLS = np.zeros(256, dtype=np.uint8)  # byte class: 1 digit, 2 dot, 3 minus, 4 quote, 0 other
_CLS[48:58] = 1
_CLS[_DOT], _CLS[_MINUS], _CLS[_QUOTE] = 2, 3, 4


def _same_layout(m: np.ndarray) -> np.ndarray | None:
    """Every token the same length and shape (``"dddd.ddd"``, ``dddd``): the common case of a
    real trace, parsed eight digits at a time (SWAR arithmetic on uint64 lanes, see
    :func:`_swar8`). None when the tokens differ in shape or are not plain numbers: the general
    path takes them.

    The integer part is read column by column: its first ``dot % 8`` digits one at a time
    (``whole = whole * 10 + digit``), the rest eight at a time (``whole = whole * 10**8 +
    _swar8(...)``), so a 16-digit µs time is two SWAR reads. The fraction's first three digits
    are the ns (weights 100, 10, 1), a fourth rounds half up, later ones are only validated.
    E.g. ``"1704161511420306.4915"``: whole = 17041615 * 10**8 + 11420306, ns = whole * 1000
    + 491 + (5 >= 5).
    """
    n, width = m.shape
    kinds = _CLS[m[0]].tolist()
    first = 0
    if kinds[0] == 4 and kinds[-1] == 4 and width >= 3:
        first, kinds = 1, kinds[1:-1]
    neg = bool(kinds) and kinds[0] == 3
    body = kinds[1:] if neg else kinds
    if not body or any(k not in (1, 2) for k in body) or body.count(2) > 1:
        return None
    dot = body.index(2) if 2 in body else len(body)
    lead = first + neg  # column of the first integer digit
    if dot > _MAX_INT_DIGITS or (dot == 0 and len(body) == 1):
        return None
    for j, k in enumerate(_CLS[m[0]].tolist()):  # every non-digit column equals row 0's byte
        if k != 1 and not (m[:, j] == m[0, j]).all():
            return None
    flat = m.reshape(-1)
    whole = np.zeros(n, np.int64)
    ok = np.ones(n, bool)
    rem = dot % 8
    for j in range(lead, lead + rem):
        whole *= 10
        whole += _digit_col(m[:, j], ok)
    for j in range(lead + rem, lead + dot, 8):
        whole *= 10**8
        whole += _swar8(flat, j, width, ok)
    frac_n = len(body) - dot - 1
    ns = whole * 1000
    for i in range(min(frac_n, 3)):
        ns += _digit_col(m[:, lead + dot + 1 + i], ok) * 10 ** (2 - i)
    for i in range(3, frac_n):  # validate the rest; the fourth digit rounds half up
        d = _digit_col(m[:, lead + dot + 1 + i], ok)
        if i == 3:
            ns += d >= 5
    if not ok.all() or (whole > NS_LIMIT_US).any():
        return None
    return -ns if neg else ns


def _digit_col(col: np.ndarray, ok: np.ndarray) -> np.ndarray:
    d = col.astype(np.int64) - _DIGIT0
    ok &= (d >= 0) & (d <= 9)
    return d


#: '0' (0x30) in each of the eight bytes: subtracted, it turns ASCII digits into their values
_ZEROS8 = np.uint64(0x3030303030303030)


def _swar8(flat: np.ndarray, col: int, width: int, ok: np.ndarray) -> np.ndarray:
    """Eight ASCII digits at ``col`` of every row as one int (little-endian uint64 lanes).

    SWAR ("SIMD within a register"): the eight bytes are read as one little-endian uint64, so
    the token's first (most significant) digit is the lowest byte, and three multiply-adds of
    neighbouring lanes make the number, each doubling the lane width (1 -> 2 -> 4 -> 8 digits).
    Worked example, the text ``"12345678"``::

        read            x = 0x38_37_36_35_34_33_32_31   (bytes '8'..'1', '1' lowest)
        x -= _ZEROS8    x = 0x08_07_06_05_04_03_02_01   (each byte its digit)
        8-bit lanes:    x*10 + (x >> 8), keep every 2nd byte (0x00FF00FF00FF00FF)
                        -> 16-bit lanes 12, 34, 56, 78   (1*10+2, 3*10+4, ...)
        16-bit lanes:   x*100 + (x >> 16), keep every 2nd 16 bits (0x0000FFFF0000FFFF)
                        -> 32-bit lanes 1234, 5678
        32-bit lanes:   x*10000 + (x >> 32), keep the low 32 bits (0x00000000FFFFFFFF)
                        -> 12345678

    No step carries into the next lane: a lane's result (at most 99, 9999, 99999999) fits in
    the lane, so the masks only drop the garbage the shifted-in neighbour left above it.
    """
    n = len(flat) // width
    x = np.ndarray((n,), dtype="<u8", buffer=flat, offset=col, strides=(width,)).copy()
    # Validation, all eight bytes at once: a byte b is a digit when 0x30 <= b <= 0x39, that is
    # when both b and b + 6 have high nibble 3 ('9' + 6 = 0x3F; ':' + 6 = 0x40 does not; '/'
    # = 0x2F fails on its own nibble). t puts b's high nibble in each byte's high half and
    # (b + 6)'s in its low half, so every byte of t is 0x33 exactly when every byte is a digit.
    # (b + 6 carries into the next byte only for b >= 0xFA, whose own high nibble already fails.)
    hi = np.uint64(0xF0F0F0F0F0F0F0F0)  # the high nibble of each byte
    t = x + np.uint64(0x0606060606060606)  # b + 6 in each byte
    t &= hi
    t >>= np.uint64(4)
    t |= x & hi
    ok &= t == np.uint64(0x3333333333333333)  # every byte in '0'..'9'
    x -= _ZEROS8  # no borrow: every byte is >= 0x30 where ok holds (other rows are dropped)
    # (shift to bring the next lane down, the weight of the lower lane, mask keeping each pair's
    # lower lane): see the worked example above
    for shift, mul, mask in (
        (8, 10, 0x00FF00FF00FF00FF),
        (16, 100, 0x0000FFFF0000FFFF),
        (32, 10000, 0x00000000FFFFFFFF),
    ):
        t = x >> np.uint64(shift)
        x *= np.uint64(mul)
        x += t
        x &= np.uint64(mask)
    return x.astype(np.int64)


def _parse_block(b: np.ndarray, buf: bytes, starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    out = np.full(len(lens), NA_NS, dtype=np.int64)
    first = b[starts]
    last = b[starts + lens - 1]
    quoted = (first == _QUOTE) & (last == _QUOTE) & (lens >= 2)
    s = starts + quoted
    ln = lens - 2 * quoted
    null = (lens == 4) & (first == ord("n"))  # JSON null: no timestamp
    width = int(min(ln.max(initial=0), _MAX_WIDTH))
    slow = ((ln > _MAX_WIDTH) | (ln == 0)) & ~null
    if width > 0:
        col = np.arange(width, dtype=np.int64)
        inside = col[None, :] < ln[:, None]
        m = b[np.minimum(s[:, None] + col[None, :], len(b) - 1)]
        m[~inside] = _DIGIT0  # padding reads as a digit; the masks below keep it out
        digit = m - np.uint8(_DIGIT0)
        is_digit = digit <= 9
        is_dot = m == _DOT
        neg = m[:, 0] == _MINUS
        ok = (is_digit | is_dot | ((col == 0)[None, :] & (m == _MINUS))).all(axis=1)
        ndot = is_dot.sum(axis=1)
        ok &= ndot <= 1
        ok &= (is_digit & inside).sum(axis=1) >= 1
        dotpos = np.where(ndot == 1, is_dot.argmax(axis=1), ln)
        ok &= dotpos - neg <= _MAX_INT_DIGITS
        # integer part: digit k weighs 10**(dotpos-1-k) for neg <= k < dotpos
        exp_i = dotpos[:, None] - 1 - col[None, :]
        use_i = (col[None, :] >= neg[:, None]) & (exp_i >= 0) & (exp_i < _MAX_INT_DIGITS)
        d64 = digit.astype(np.int64)
        whole = np.where(use_i, d64 * _POW10[np.clip(exp_i, 0, 18)], 0).sum(axis=1)
        # fraction: the first three digits after the dot are ns, the fourth rounds half up
        pos_f = col[None, :] - dotpos[:, None] - 1
        use_f = (pos_f >= 0) & (pos_f <= 2) & inside
        frac = np.where(use_f, d64 * _POW10[np.clip(2 - pos_f, 0, 2)], 0).sum(axis=1)
        rnd = ((pos_f == 3) & inside & (digit >= 5)).any(axis=1)
        beyond = ok & (whole > NS_LIMIT_US + 1)  # a number, but past int64 ns: stays NA
        ok &= whole <= NS_LIMIT_US
        ok &= ~slow & ~null
        ns = np.where(ok, whole, 0) * 1000 + frac + rnd
        out[ok] = np.where(neg, -ns, ns)[ok]
        slow |= ~ok & ~null & ~beyond  # the edge of the range itself is checked exactly there
    for i in np.flatnonzero(slow):
        out[i] = _token_ns(buf[starts[i] : starts[i] + lens[i]])
    return out


def _token_ns(token: bytes) -> int:
    """One raw JSON token the vectorised path refused (exponent, escapes, spaces, junk)."""
    import msgspec

    try:
        value = msgspec.json.decode(token)
    except msgspec.DecodeError:
        return NA_NS
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return NA_NS
    text = value if isinstance(value, str) else token.decode("ascii", "replace")
    ns = parse_scaled(text, 3)
    if ns is None or not -(2**63) < ns < 2**63:
        return NA_NS
    return ns
