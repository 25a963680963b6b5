"""PCIe/NVLink communication-time ratio = bandwidth ratio."""


def generate(rng):
    nv, pcie = rng.choice([200, 300, 450, 600]), rng.choice([16, 25, 32])
    r = nv / pcie
    return {"params": {"nv": nv, "pcie": pcie}, "answer": r,
            "accept": [f"{r:.4g}", f"{r:.4g}x", f"{r:.4g} 倍"], "reject": [f"{pcie / nv:.4g}", f"{nv - pcie}"]}
