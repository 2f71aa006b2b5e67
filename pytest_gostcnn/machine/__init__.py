"""What the machine is: a computing cell's theoretical peak (given or estimated), the CPU
model and the library versions; below the backend contract, which returns a peak."""
