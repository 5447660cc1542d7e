"""asv benchmarks of blasmp_array (see ``asv_bench/asv.conf.json``)."""
