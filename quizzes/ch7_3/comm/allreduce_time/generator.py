"""All-reduce time ~ gradient bytes / link bandwidth, NVLink or PCIe."""
LINKS = [("NVLink", [200, 300, 450]), ("PCIe", [16, 25, 32])]
SIZES = [0.5, 1, 3, 7, 13]


def generate(rng):
    link, bws = rng.choice(LINKS)
    bw, b = rng.choice(bws), rng.choice(SIZES)
    size = 2 * b * 1e9
    t = size / (bw * 1e9)
    return {"params": {"billions": f"{b:g}", "link": link, "bw": bw, "fp32_time": 2 * t, "bits_time": 8 * t},
            "answer": t, "accept": [f"{t:.4g} s", f"{t * 1000:.4g} ms", f"{t:.4g}秒"],
            "reject": [f"{2 * t:.4g} s", f"{8 * t:.4g} s", f"{t / 2:.4g} s"]}
