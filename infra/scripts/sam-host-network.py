"""Run the SAM CLI with `--docker-network host` doing what it says.

Usage: .venv/bin/python infra/scripts/sam-host-network.py local invoke ... --docker-network host

SAM CLI (checked with 1.170.0) accepts `--docker-network host` but never
gives the container the host's network: since it moved to docker-py 6
(aws/aws-sam-cli PR #4356), which refuses `network_mode="host"` together with
port bindings, `Container.create` skips "host" and leaves the container on
the default bridge (aws/aws-sam-cli issues #4236, #3609, #7732; the fix in
PR #7278 was closed unmerged). In there 127.0.0.1 is the container itself, so
a function cannot reach moto or a site on the host's loopback.

This wrapper starts the same CLI with two changes, only when the command
line asks for `--docker-network host`:
- containers are created with network_mode "host" and no port bindings;
- the emulator in the container (aws-lambda-rie) listens on 127.0.0.1 at the
  port SAM picked for it, instead of its default 0.0.0.0:8080, which on the
  host's network would collide with anything on 8080 and with the next
  container (issue #6347), and which SAM would not be connecting to anyway;
- its Runtime API (which the function's bootstrap polls) moves off its
  default 127.0.0.1:9001 to a free port, or a second container at once (a
  `sam local invoke` while `start-api` keeps a warm one) fails to start and
  SAM prints an empty answer.
Everything else is SAM's own code. Without the flag it changes nothing.
"""

import sys

import docker.models.containers
from samcli.cli.main import cli
from samcli.local.docker import container as samcontainer
from samcli.local.docker.utils import find_free_port

RIE = "/var/rapid/aws-lambda-rie"
ADDRESS_FLAG = "--runtime-interface-emulator-address"
RUNTIME_API_FLAG = "--runtime-api-address"


def host_network_requested(argv):
    for i, arg in enumerate(argv):
        if arg == "--docker-network" and i + 1 < len(argv) and argv[i + 1] == "host":
            return True
        if arg == "--docker-network=host":
            return True
    return False


def patch():
    create_container = docker.models.containers.ContainerCollection.create

    def create_on_host_network(self, image, command=None, **kwargs):
        kwargs.pop("ports", None)
        kwargs["network_mode"] = "host"
        return create_container(self, image, command, **kwargs)

    docker.models.containers.ContainerCollection.create = create_on_host_network

    create = samcontainer.Container.create

    def create_with_rie_address(self, *args, **kwargs):
        entry = list(self._entrypoint or [])
        if entry and entry[0] == RIE and ADDRESS_FLAG not in entry:
            # Above SAM's own range (5000-9000), so the two never meet.
            api_port = find_free_port(network_interface="127.0.0.1", start=9100, end=9900)
            self._entrypoint = entry + [
                ADDRESS_FLAG, "127.0.0.1:%d" % self.rapid_port_host,
                RUNTIME_API_FLAG, "127.0.0.1:%d" % api_port,
            ]
        return create(self, *args, **kwargs)

    samcontainer.Container.create = create_with_rie_address


if __name__ == "__main__":
    if host_network_requested(sys.argv[1:]):
        patch()
    sys.argv[0] = "sam"
    sys.exit(cli())
