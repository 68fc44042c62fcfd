# Stand-in (bench/peers.py): a package marker.
