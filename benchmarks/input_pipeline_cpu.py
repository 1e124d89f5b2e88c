"""CPU cost of one ImageNet training sample's input pipeline on this machine's cores (core-seconds per sample).

What torchvision's ImageNet training loader (the `pytorch` data backend of NVIDIA DeepLearningExamples'
ConvNets) does per sample in a DataLoader worker: decode the JPEG with Pillow (libjpeg-turbo), take a random
crop of 8-100 % of the area with aspect ratio 3/4-4/3 (RandomResizedCrop) resized to 224 x 224 (bilinear),
flip it with probability 1/2 and turn it into a uint8 array (fast_collate). The JPEGs are synthetic but sized
as ImageNet's training set: 500 x 375 pixels (the most common ILSVRC2012 size) at about 110 KB each
(ILSVRC2012 train: about 138 GB over 1.28 M images = 108 KB). CPU time is read with time.thread_time, so
other processes sharing the cores do not inflate it. Usage:

    python benchmarks/input_pipeline_cpu.py [--images 200] [--repeats 3]

prints the CPU it ran on (/proc/cpuinfo: model name, family/model/stepping, SMT) and the median
core-milliseconds per sample (what `workload.input_pipeline.cpu_per_sample` holds; the default is measured on
simdist/hardware/data/host_cpus.yaml's reference CPU, and simdist scales it to a node's CPU by per-core
integer throughput). `--pipeline tf` runs DeepLearningExamples' TensorFlow ConvNets training preprocessing
instead (utils/image_processing.py: tf.image.decode_jpeg with dct_method INTEGER_FAST and fancy_upscaling off,
sample_distorted_bounding_box crop, random flip, bilinear resize to 224 x 224) as a tf.data map on one thread,
timed by process CPU time (needs TensorFlow installed; it is not a simdist dependency).
"""
from __future__ import annotations

import argparse
import io
import math
import random
import statistics
import time

import numpy as np
from PIL import Image


def synthetic_jpegs(n: int, seed: int = 0, size=(500, 375), target_kb: float = 110.0) -> list[bytes]:
    """JPEGs of ImageNet's typical size: smooth colour fields plus noise, its amplitude chosen so the mean
    file is close to `target_kb` at quality 90."""
    rng = np.random.default_rng(seed)
    w, h = size
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)

    def make(amp: float, k: int) -> bytes:
        r = np.random.default_rng(seed * 1000 + k)
        base = np.stack([128 + 100 * np.sin(xx / r.uniform(20, 80) + c) * np.cos(yy / r.uniform(20, 80) + 2 * c)
                         for c in range(3)], axis=-1)
        img = np.clip(base + r.normal(0, amp, base.shape), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=90)
        return buf.getvalue()

    lo, hi = 1.0, 80.0  # bisect the noise amplitude on a few images
    for _ in range(12):
        amp = (lo + hi) / 2
        kb = statistics.fmean(len(make(amp, k)) for k in range(4)) / 1024
        lo, hi = (amp, hi) if kb < target_kb else (lo, amp)
    del rng
    return [make((lo + hi) / 2, k) for k in range(n)]


def random_resized_crop(w: int, h: int, rnd: random.Random, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params: (left, top, width, height)."""
    area = w * h
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(10):
        target = area * rnd.uniform(*scale)
        ar = math.exp(rnd.uniform(*log_ratio))
        cw, ch = int(round(math.sqrt(target * ar))), int(round(math.sqrt(target / ar)))
        if 0 < cw <= w and 0 < ch <= h:
            return rnd.randint(0, w - cw), rnd.randint(0, h - ch), cw, ch
    side = min(w, h)
    return (w - side) // 2, (h - side) // 2, side, side


def sample(jpeg: bytes, rnd: random.Random) -> np.ndarray:
    img = Image.open(io.BytesIO(jpeg)).convert("RGB")
    x, y, cw, ch = random_resized_crop(*img.size, rnd)
    img = img.resize((224, 224), Image.BILINEAR, box=(x, y, x + cw, y + ch))
    if rnd.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return np.asarray(img)


def cpu_description() -> str:
    """The CPU as /proc/cpuinfo names it (Linux), with family/model/stepping (a hypervisor may mask the name)."""
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        import platform

        return platform.processor() or "unknown CPU"
    first = text.split("\n\n")[0]
    info = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in first.splitlines()))
    cpus = text.count("processor\t:")
    return (f"{info.get('model name', '?')} (vendor {info.get('vendor_id', '?')}, family {info.get('cpu family', '?')} "
            f"model {info.get('model', '?')} stepping {info.get('stepping', '?')}, {cpus} logical CPUs, "
            f"siblings {info.get('siblings', '?')} / cores {info.get('cpu cores', '?')} per package)")


def tf_data_s_per_sample(jpegs: list[bytes], repeats: int) -> list[float]:
    """DeepLearningExamples TensorFlow ConvNets' training preprocessing (see the module docstring) as tf.data
    runs it: a graph-mode map over the JPEGs, one map thread and one private thread-pool thread, batched so the
    Python iteration is amortised; process CPU time (every TensorFlow thread) per sample, per repeat."""
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)

    def prep(jpeg):
        image = tf.image.decode_jpeg(jpeg, channels=3, fancy_upscaling=False, dct_method="INTEGER_FAST")
        begin, size, _ = tf.image.sample_distorted_bounding_box(
            tf.shape(image), bounding_boxes=tf.zeros([1, 0, 4]), min_object_covered=0.1,
            aspect_ratio_range=[0.75, 1.33], area_range=[0.05, 1.0], max_attempts=100,
            use_image_if_no_bounding_boxes=True)
        image = tf.image.random_flip_left_right(tf.slice(image, begin, size))
        return tf.image.resize(image, [224, 224], method="bilinear")

    options = tf.data.Options()
    options.threading.private_threadpool_size = 1
    options.threading.max_intra_op_parallelism = 1
    ds = (tf.data.Dataset.from_tensor_slices(jpegs).map(prep, num_parallel_calls=1).batch(len(jpegs))
          .with_options(options))
    for _ in ds:  # first pass builds the graph and kernels
        pass
    runs = []
    for _ in range(repeats):
        t0 = time.process_time()
        for _ in ds:
            pass
        runs.append((time.process_time() - t0) / len(jpegs))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--pipeline", choices=("pillow", "tf"), default="pillow")
    args = ap.parse_args()
    jpegs = synthetic_jpegs(args.images)
    rnd = random.Random(0)
    if args.pipeline == "tf":
        runs = tf_data_s_per_sample(jpegs, args.repeats)
    else:
        runs = []
        for _ in range(args.repeats):
            t0 = time.thread_time()
            for j in jpegs:
                sample(j, rnd)
            runs.append((time.thread_time() - t0) / len(jpegs))
    print(f"CPU: {cpu_description()}")
    print(f"pipeline: {args.pipeline}")
    kb = statistics.fmean(len(j) for j in jpegs) / 1024
    print(f"{len(jpegs)} JPEGs 500x375, mean {kb:.0f} KB; core-ms per sample: "
          f"median {statistics.median(runs) * 1e3:.2f} (runs {', '.join(f'{r * 1e3:.2f}' for r in runs)})")


if __name__ == "__main__":
    main()
