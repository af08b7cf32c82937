"""The store commits one of the server's writes, and the server never hears so: the link is cut
(or the server dies) right after that write, at each of a charge's writes in turn."""

from __future__ import annotations

from dataclasses import replace

from harness import AfterWrite, Scenario, ScenarioContext, Target
from harness.services._commit_proxy import StoreFault, Watch


def _applies(target: Target) -> str | None:
    store = target.store_proxy
    if store is not None and not store.reads_writes:
        return (f"target {target.name}'s store link is plain TCP, so the harness cannot see its "
                "writes: set [store_proxy] protocol = \"postgresql\" or \"redis\", whichever the "
                "store speaks")
    return None


def _learn(ctx: ScenarioContext) -> Watch:
    """A first charge, untouched: how many writes a charge with a fresh key makes."""
    request = ctx.request(ctx.new_key(), label="learn-writes")
    answer, watch = ctx.send_watched(request)
    if answer.status is None or not 200 <= answer.status < 300:
        ctx.not_applicable(f"an ordinary charge was answered {answer.status or answer.error}, "
                           "so there are no writes of a successful charge to strike after")
    if not watch.writes:
        proxy = ctx.deployment.commit_proxy
        unreadable = proxy.unreadable if proxy is not None else None
        ctx.not_applicable(
            "the store proxy saw no committed write while a charge ran"
            + (f": it could not read the link ({unreadable})" if unreadable else
               ": the target writes where the proxy cannot see it (another store, TLS, a "
               "function called by a SELECT)"))
    return watch


def run(ctx: ScenarioContext) -> None:
    writes = len(_learn(ctx).writes)
    faults: list[StoreFault] = ["cut"]
    if "restart" in ctx.target.capabilities():
        faults.append("kill")
    for fault in faults:
        for write in range(1, writes + 1):
            request = ctx.request(ctx.new_key(), label=f"{fault}-after-write-{write}")
            ctx.send_watched(request, plan=AfterWrite(write, fault))
            ctx.converge(replace(request, label="retry"))


SCENARIO = Scenario(
    name="cut-after-commit",
    summary="the store commits a write and the server never hears so: at each write of a "
            "charge, the link is cut or the server dies; retries converge to one charge",
    story=(
        "A charge is not one write. A server claims the key, records the charge, stores the "
        "response: two or three commits, and the database acknowledges each one over the "
        "network. Here the acknowledgement of one of them never arrives: the link to the "
        "database is cut the moment the write commits, or the server is killed. The write is "
        "in the database; the server does not know it. It answers an error, the client retries. "
        "A server that commits the charge and its stored response together finds the finished "
        "charge and replays it, or finds nothing and charges once. One that commits them apart "
        "(a charge committed before its key, a response stored in two steps, a claim written "
        "outside the work's transaction) is caught between the two: the charge is there, the "
        "key says nothing happened, and the retry charges the card again. No hook in the "
        "server is needed: the harness reads the database's protocol on the wire."
    ),
    properties=("P1", "P2", "P9"),
    plan=(
        "send a charge with a fresh key and count the writes the store commits for it, on the "
        "store proxy that reads PostgreSQL's or Redis's protocol (n/a when it sees none)",
        "for each write i of those: send a charge with a fresh key; right after its write i "
        "commits, drop the store's acknowledgement and cut the connection",
        "retry with the same key until a final answer, outwaiting the promised lease while "
        "the key is still claimed (see crash-mid-request)",
        "then the same for each write again, killing the server (SIGKILL) instead of cutting, "
        "and restarting it, when the harness may restart it",
        "a fault that never struck (the charge made fewer writes this time) makes the verdict "
        "unknown, never a pass",
        "check: exactly one charge per key, every success names it, no key stuck",
    ),
    run=run,
    needs=frozenset({"store-proxy"}),
    uses=frozenset({"restart"}),
    applies=_applies,
    expected_seconds=4.0,
)
