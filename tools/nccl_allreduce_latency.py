#!/usr/bin/env python3
"""NCCL's all-reduce latency for the message of a tensor-parallel decode step (T x 2880 BF16), in a
CUDA graph, through PyTorch — the baseline that mxserve's one-shot kernels are measured against
(docs/TENSOR_PARALLEL.md, PERFORMANCE.md run 25). Runs on the GPU machine, which has torch:

    python3 tools/nccl_allreduce_latency.py --gpus 2 --tokens 1,8,64

NCCL's own environment applies (e.g. NCCL_PROTO=LL); keep NCCL_NVLS_ENABLE=0 on shared machines.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

CALLS, REPLAYS = 100, 20


def worker(rank, n, tokens, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=n, device_id=torch.device("cuda", rank))
    for t in tokens:
        x = torch.randn(t, 2880, device="cuda", dtype=torch.bfloat16)
        for _ in range(10):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            with torch.cuda.graph(g, stream=s):
                for _ in range(CALLS):
                    dist.all_reduce(x)
        g.replay()
        torch.cuda.synchronize()
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(REPLAYS):
            g.replay()
        torch.cuda.synchronize()
        us = (time.perf_counter() - t0) / (CALLS * REPLAYS) * 1e6
        if rank == 0:
            print(f"nccl all_reduce, {n} GPUs, {t} x 2880 bf16: {us:.2f} us per call (in a CUDA graph; "
                  f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))}, NCCL_PROTO={os.environ.get('NCCL_PROTO', 'default')})",
                  flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", type=int, default=2)
    ap.add_argument("--tokens", default="1,8,64")
    ap.add_argument("--port", type=int, default=29511)
    a = ap.parse_args()
    mp.spawn(worker, args=(a.gpus, [int(t) for t in a.tokens.split(",")], a.port), nprocs=a.gpus)


if __name__ == "__main__":
    main()
