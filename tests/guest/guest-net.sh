# guest-net.sh -- sourced in the guest before the command: loopback, then the rxe devices.
# Default: one dummy netdev with 10.77.0.1/24 and rxe0 on it (the peers of a test talk through
# rxe's loopback path). RPMA_GUEST_NETNS=1: namespaces rpma-server (10.77.1.1) and rpma-client
# (10.77.1.2) joined by a veth pair, each end with its own rxe device, so two peers cross a link.
ip link set lo up
if [ "$RPMA_GUEST_NETNS" = 1 ]; then
    ip netns add rpma-server && ip netns add rpma-client
    ip link add rpma-veth0 type veth peer name rpma-veth1
    ip link set rpma-veth0 netns rpma-server && ip link set rpma-veth1 netns rpma-client
    ip -n rpma-server addr add 10.77.1.1/24 dev rpma-veth0 && ip -n rpma-server link set rpma-veth0 up
    ip -n rpma-client addr add 10.77.1.2/24 dev rpma-veth1 && ip -n rpma-client link set rpma-veth1 up
    ip -n rpma-server link set lo up && ip -n rpma-client link set lo up
    ip netns exec rpma-server rdma link add rxe0 type rxe netdev rpma-veth0
    ip netns exec rpma-client rdma link add rxe1 type rxe netdev rpma-veth1
    export RPMA_GUEST_NS_SERVER=rpma-server RPMA_GUEST_NS_CLIENT=rpma-client
    export RPMA_GUEST_ADDR=10.77.1.1 RPMA_GUEST_ADDR_CLIENT=10.77.1.2
else
    ip link add rpma0 type dummy
    ip addr add 10.77.0.1/24 dev rpma0
    ip link set rpma0 up
    rdma link add rxe0 type rxe netdev rpma0
    export RPMA_GUEST_ADDR=10.77.0.1
fi
