"""PyTorch CPU timing of the autoencoder, for bench/ae_cpu.sh: the same model, threads and
batch as our ae-train/ae-encode, on the same kind of data. Prints one JSON line. The model
is the seed's (3x32x32, encoder 256,128) unless --input-shape / --encoder-channels say
otherwise."""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "python"))
from ae_torch_model import Autoencoder, to_input  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--train-images", type=int, default=1024)
    p.add_argument("--encode-images", type=int, default=2048)
    p.add_argument("--input-shape", default="3,32,32", help="C,H,W")
    p.add_argument("--encoder-channels", default="256,128")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    n = max(a.train_images, a.encode_images)
    shape = tuple(int(v) for v in a.input_shape.split(","))
    channels = tuple(int(v) for v in a.encoder_channels.split(","))
    images = to_input(rng.integers(0, 256, size=(n,) + shape, dtype=np.uint8))
    model = Autoencoder(shape[0], channels)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.MSELoss()

    def train(count):
        for start in range(0, count, a.batch_size):
            x = images[start:start + a.batch_size]
            opt.zero_grad()
            loss = loss_fn(model(x), x)
            loss.backward()
            opt.step()

    train(2 * a.batch_size)  # warm-up
    t = time.perf_counter()
    train(a.train_images)
    train_ips = a.train_images / (time.perf_counter() - t)

    with torch.no_grad():
        model.encode(images[:a.batch_size])
        t = time.perf_counter()
        for start in range(0, a.encode_images, a.batch_size):
            model.encode(images[start:start + a.batch_size]).flatten(1).numpy()
        encode_ips = a.encode_images / (time.perf_counter() - t)
    print(json.dumps({"torch": torch.__version__, "threads": a.threads, "batch_size": a.batch_size,
                      "input_shape": list(shape), "encoder_channels": list(channels),
                      "train_images_per_second": train_ips, "encode_images_per_second": encode_ips}))


if __name__ == "__main__":
    main()
