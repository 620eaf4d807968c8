from sim.demo.cli import main

main()
