"""The allocator settings every computing process gets (cluster workers and chapter kernels)."""

from identifiability.base import cluster


def test_allocator_env_serves_from_the_heap_and_keeps_freed_memory(monkeypatch):
    for k in cluster.ALLOCATOR_ENV:
        monkeypatch.delenv(k, raising=False)
    env = cluster.allocator_env()
    assert env["MALLOC_MMAP_MAX_"] == "0"
    # far above Dask's default of 65536, which returns every freed block to the kernel at once
    assert int(env["MALLOC_TRIM_THRESHOLD_"]) >= 2**30


def test_a_users_own_allocator_setting_wins(monkeypatch):
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("MALLOC_MMAP_MAX_", raising=False)
    assert cluster.allocator_env() == {"MALLOC_MMAP_MAX_": "0", "MALLOC_TRIM_THRESHOLD_": "65536"}
