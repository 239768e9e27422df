/* driver.c - the stand-in for the NVIDIA driver library (libcuda.so.1) that saga's CUDA loader
 * checks for before it opens a CUDA module. Under the simulator nothing calls into it; it only has
 * to be there. scripts/cudasim puts its directory on LD_LIBRARY_PATH. */
int cudasim_driver_stand_in(void);

int cudasim_driver_stand_in(void) {
    return 1;
}
