# Stand-in (bench/peers.py): the wheel's module imports torch.distributed. The benchmark
# imports only this constant from it (the wheel's value), used with --pd-separated alone.
FAKE_BOOTSTRAP_HOST = "2.2.2.2"
