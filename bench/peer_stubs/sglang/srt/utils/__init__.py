# Stand-in (bench/peers.py): the wheel's file does `from sglang.srt.utils.common import *`
# (torch). Empty, so that the wheel's own sglang.srt.utils.network imports alone.
